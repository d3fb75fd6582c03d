-- The VINs answered (data, or a stable "no data") -> `fetch_status` rows.
SELECT vin, $dataset AS dataset, 'found' AS outcome, fetched_at FROM found
UNION ALL
SELECT vin, $dataset AS dataset, 'no_data' AS outcome, fetched_at FROM no_data;
