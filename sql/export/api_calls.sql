-- called_month: the month (UTC) of the call as its first day, a DATE (folders called_month=2026-02-01).
SELECT *, CAST(date_trunc('month', timezone('UTC', fetched_at)) AS DATE) AS called_month FROM api_calls;
