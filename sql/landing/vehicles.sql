-- Roster upsert by VIN; the first run that listed a VIN is kept.
UPDATE incoming SET first_seen_at = fetched_at, first_seen_run_id = run_id,
    duplicate_count = coalesce(duplicate_count, 0);
-- A VIN the file gives is `file`, one found by plate `plate`: the latest listing says which.
UPDATE incoming SET vin_source = coalesce(vin_source, 'file');

MERGE INTO vehicles AS t
USING (SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY vin ORDER BY fetched_at DESC, source_file, source_row) = 1) AS s
ON t.vin = s.vin
WHEN MATCHED THEN UPDATE SET
    vin_source = s.vin_source,
    unit_number = s.unit_number, plate = s.plate, state = s.state, mileage = s.mileage, mileage_unit = s.mileage_unit,
    condition = s.condition, condition_rejected = s.condition_rejected, fleet = s.fleet,
    extra = s.extra, check_digit_valid = s.check_digit_valid, duplicate_count = s.duplicate_count,
    source_file = s.source_file, source_row = s.source_row, run_id = s.run_id, fetched_at = s.fetched_at
WHEN NOT MATCHED THEN INSERT BY NAME;
