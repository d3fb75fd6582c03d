INSERT OR REPLACE INTO api_calls BY NAME
SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY call_id ORDER BY fetched_at DESC) = 1;
