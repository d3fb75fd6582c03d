-- Latest decode per VIN; an older fetch landing late does not overwrite a newer one.
MERGE INTO specs AS t
USING (SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY vin ORDER BY fetched_at DESC) = 1) AS s
ON t.vin = s.vin
-- The same data again (a forced refresh, a replayed journal, a re-parse): only the receipt moves on, so
-- identical rows do not pay a whole-row update.
WHEN MATCHED AND s.fetched_at >= t.fetched_at AND row(s.year, s.make, s.model, s.trim, s.style, s.type, s.made_in, s.doors, s.fuel_type, s.engine, s.engine_cylinders, s.transmission, s.drivetrain, s.colors, s.equipment, s.warranties, s.is_international)
         IS NOT DISTINCT FROM row(t.year, t.make, t.model, t.trim, t.style, t.type, t.made_in, t.doors, t.fuel_type, t.engine, t.engine_cylinders, t.transmission, t.drivetrain, t.colors, t.equipment, t.warranties, t.is_international)
    THEN UPDATE SET run_id = s.run_id, fetched_at = s.fetched_at
WHEN MATCHED AND s.fetched_at >= t.fetched_at THEN UPDATE
WHEN NOT MATCHED THEN INSERT BY NAME;
