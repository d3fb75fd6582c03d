-- /specs answers -> `specs` rows (connectors/models/specs.py, tasks/land/frames.py specs_frame). The body is
-- parsed once (json_transform) into the members read, each leaf kept as JSON for the lenient parsers
-- (`equipment` as its entries in the order sent).
SELECT vin,
    CAST(shred_int(a.year) AS INTEGER) AS year, shred_text(a.make) AS make, shred_text(a.model) AS model,
    shred_text(a.trim) AS trim, shred_text(a.style) AS style, shred_text(a.type) AS type,
    shred_text(a.made_in) AS made_in, CAST(shred_int(a.doors) AS INTEGER) AS doors,
    shred_text(a.fuel_type) AS fuel_type, shred_text(a.engine) AS engine,
    CAST(shred_int(a.engine_cylinders) AS INTEGER) AS engine_cylinders,
    shred_text(a.transmission) AS transmission, shred_text(a.drivetrain) AS drivetrain,
    CAST(list_transform(coalesce(b.colors, []),
                        lambda c: {'category': shred_text(c.category), 'name': shred_text(c.name)})
         AS STRUCT(category VARCHAR, name VARCHAR)[]) AS colors,
    CAST(coalesce(list_transform(map_entries(b.equipment), lambda e: {'name': e.key, 'value': shred_text(e.value)}), [])
         AS STRUCT(name VARCHAR, value VARCHAR)[]) AS equipment,
    CAST(list_transform(coalesce(b.warranties, []),
                        lambda w: {'type': shred_text(w.type), 'miles': CAST(shred_int(w.miles) AS INTEGER),
                                   'months': CAST(shred_int(w.months) AS INTEGER)})
         AS STRUCT(type VARCHAR, miles INTEGER, months INTEGER)[]) AS warranties,
    coalesce(shred_text(a.vid) IS NOT NULL, false) AS is_international,
    fetched_at
FROM (SELECT vin, fetched_at, b, b.attributes AS a
      FROM (SELECT vin, fetched_at, json_transform(body, '{"attributes": {"year": "JSON", "make": "JSON", "model": "JSON",
                "trim": "JSON", "style": "JSON", "type": "JSON", "made_in": "JSON", "doors": "JSON", "fuel_type": "JSON",
                "engine": "JSON", "engine_cylinders": "JSON", "transmission": "JSON", "drivetrain": "JSON", "vid": "JSON"},
                "colors": [{"category": "JSON", "name": "JSON"}], "equipment": "MAP(VARCHAR, JSON)",
                "warranties": [{"type": "JSON", "miles": "JSON", "months": "JSON"}]}') AS b
            FROM found));
