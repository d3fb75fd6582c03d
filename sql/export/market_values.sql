-- valued_month: the month of valued_on as its first day, a DATE (folders valued_month=2026-02-01), which
-- DuckDB, polars and pyarrow read back as a date.
SELECT *, CAST(date_trunc('month', valued_on) AS DATE) AS valued_month, vin_bucket(vin) AS vin_bucket FROM market_values;
