-- Whether the database has the view vin_status (a published file written before migration 0016 has not).
SELECT count(*) > 0 FROM duckdb_views() WHERE view_name = 'vin_status' AND NOT internal;
