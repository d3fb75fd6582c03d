-- The view vin_status in one pass, grouped as `fleet status` shows it (flows/status.py splits it three ways: per
-- dataset and state; what is pending, why and since which run; the failures by kind). A few hundred rows whatever
-- the roster's size: answered and never-asked VINs fall into one group per dataset.
SELECT dataset, status,
       CASE WHEN status IN ('pending', 'failed') THEN reason END AS reason,
       since_run_id, http_status, retryable,
       count(*) AS vins, min(since) AS first_since, max(attempts) AS most_attempts, max(answered_at) AS last_answered
FROM vin_status
GROUP BY ALL;
