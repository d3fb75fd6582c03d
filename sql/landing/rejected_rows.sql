INSERT OR REPLACE INTO rejected_rows BY NAME
SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY run_id, source_file, source_row ORDER BY fetched_at DESC) = 1;
