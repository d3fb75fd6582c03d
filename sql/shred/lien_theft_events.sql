-- /v1/lien-theft answers -> one `lien_theft_events` row per event, numbered from 0 in the order sent. The body is
-- parsed once (json_transform), each event once more.
SELECT vin, CAST(e.i - 1 AS INTEGER) AS event_index, shred_text(e.ev->'event') AS event,
    shred_text(e.ev->'location') AS location,
    list_transform(shred_list(e.ev->'details_list'), lambda d: shred_text(d)) AS details_list,
    CAST(shred_int(b.year) AS INTEGER) AS year, shred_text(b.make) AS make,
    shred_text(b.model) AS model, shred_text(b.type) AS type, fetched_at
FROM (SELECT vin, b, fetched_at, unnest(list_transform(shred_list(b.events), lambda ev, i: {'ev': ev, 'i': i})) AS e
      FROM (SELECT vin, fetched_at, json_transform(body, '{"year": "JSON", "make": "JSON", "model": "JSON", "type": "JSON",
                                                          "events": "JSON"}') AS b
            FROM found));
