SELECT *, strftime(timezone('UTC', fetched_at), '%Y-%m') AS called_month FROM api_calls;
