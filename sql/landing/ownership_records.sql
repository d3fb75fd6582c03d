-- Latest ownership lookup per VIN.
MERGE INTO ownership_records AS t
USING (SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY vin ORDER BY fetched_at DESC) = 1) AS s
ON t.vin = s.vin
WHEN MATCHED AND s.fetched_at >= t.fetched_at THEN UPDATE
WHEN NOT MATCHED THEN INSERT BY NAME;
