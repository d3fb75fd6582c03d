-- The VINs a recall batch's results list -> `fetch_status` rows: their recall check is fresh.
SELECT vin, $dataset AS dataset, 'found' AS outcome, fetched_at FROM batch_results;
