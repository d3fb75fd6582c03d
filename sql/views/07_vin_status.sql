-- One status per roster VIN and dataset (and recall_details: the campaigns of a VIN whose recall check counted
-- recalls), first match wins:
--   not_applicable  registered where the dataset is not answered (the planner's rule: 00_registry.sql); never called
--   pending         a run planned it and left it (left_pending), and no answer or failure came since that run started;
--                   for recall_details also a recall check that counted recalls no campaign lookup has followed
--   failed          an open failure (failures; a /v1/recalls failure after a check counting recalls is recall_details')
--   answered        its latest answer had data (fetch_status; recall_details: a complete campaign listing since the count)
--   no_data         its latest answer was the service's 404 "no data"
--   never_asked     none of these: no run has asked for it
-- `fleet status` counts these; a run's summary counts the same outcomes for what it planned.

-- The VINs whose latest recall check counting recalls no complete campaign listing has followed: their campaign
-- details are due (recall_details_due.sql's rule), with when and by which run they were counted.
CREATE OR REPLACE MACRO recall_details_waiting() AS TABLE
SELECT vin, counted_at, counted_run_id FROM (
    SELECT vin, max(fetched_at) FILTER (WHERE NOT campaigns_listed AND recall_count > 0) AS counted_at,
           arg_max(run_id, fetched_at) FILTER (WHERE NOT campaigns_listed AND recall_count > 0) AS counted_run_id,
           max(fetched_at) FILTER (WHERE campaigns_listed) AS listed_at
    FROM recall_checks GROUP BY vin)
WHERE counted_at IS NOT NULL AND (listed_at IS NULL OR listed_at < counted_at);

CREATE OR REPLACE VIEW vin_status AS
WITH roster AS (
    SELECT v.vin, v.unit_number, vehicle_market(v.vin, v.state, v.extra->>'country', s.is_international) AS market
    FROM vehicles AS v LEFT JOIN specs AS s ON s.vin = v.vin
), checks AS (
    -- per VIN: the latest recall count that asks for campaign details, the latest complete listing
    SELECT vin,
           max(fetched_at) FILTER (WHERE NOT campaigns_listed AND recall_count > 0) AS counted_at,
           arg_max(run_id, fetched_at) FILTER (WHERE NOT campaigns_listed AND recall_count > 0) AS counted_run_id,
           max(fetched_at) FILTER (WHERE campaigns_listed) AS listed_at,
           arg_max(run_id, fetched_at) FILTER (WHERE campaigns_listed) AS listed_run_id,
           arg_max(has_recalls IS NULL, fetched_at) FILTER (WHERE campaigns_listed) AS listed_nothing
    FROM recall_checks GROUP BY vin
), answers AS (
    SELECT vin, dataset, outcome, fetched_at, run_id FROM fetch_status
    UNION ALL
    SELECT vin, 'recall_details', CASE WHEN listed_nothing THEN 'no_data' ELSE 'found' END, listed_at, listed_run_id
    FROM checks WHERE counted_at IS NOT NULL AND listed_at >= counted_at
), failed AS (
    SELECT CASE WHEN f.dataset = 'recalls' AND f.endpoint IN ('/v1/recalls', '/v1/recalls-ymm')
                     AND f.fetched_at >= c.counted_at THEN 'recall_details' ELSE f.dataset END AS dataset,
           f.vin, f.status, f.message, f.retryable, f.attempts, f.first_failed_at, f.fetched_at, f.run_id
    FROM failures AS f LEFT JOIN checks AS c ON c.vin = f.vin
    WHERE f.resolved_at IS NULL
), pairs AS (
    SELECT r.vin, r.unit_number, r.market, d.dataset
    FROM roster AS r CROSS JOIN (SELECT unnest(dataset_names()) AS dataset) AS d
    UNION ALL
    SELECT r.vin, r.unit_number, r.market, 'recall_details'
    FROM roster AS r JOIN checks AS c ON c.vin = r.vin WHERE c.counted_at IS NOT NULL
), joined AS (
    SELECT p.*, a.outcome, a.fetched_at AS answered_at, a.run_id AS answered_run_id,
           f.status AS http_status, f.message, f.retryable, f.attempts, f.first_failed_at, f.fetched_at AS failed_at,
           f.run_id AS failed_run_id, l.reason AS pending_reason, l.run_id AS pending_run_id, l.since, l.since_run_id,
           c.counted_at, c.counted_run_id,
           NOT dataset_applies(p.dataset, p.market) AS outside,
           l.vin IS NOT NULL AND coalesce(a.fetched_at < l.run_started_at, true)
               AND coalesce(f.fetched_at < l.run_started_at, true) AS left_waiting
    FROM pairs AS p
    LEFT JOIN answers AS a ON a.vin = p.vin AND a.dataset = p.dataset
    LEFT JOIN failed AS f ON f.vin = p.vin AND f.dataset = p.dataset
    LEFT JOIN left_pending AS l ON l.vin = p.vin AND l.dataset = p.dataset
    LEFT JOIN checks AS c ON c.vin = p.vin AND p.dataset = 'recall_details'
), classified AS (
    SELECT *, CASE WHEN outside THEN 'not_applicable'
                   WHEN left_waiting THEN 'pending'
                   WHEN failed_at IS NOT NULL THEN 'failed'
                   WHEN outcome = 'found' THEN 'answered'
                   WHEN outcome = 'no_data' THEN 'no_data'
                   WHEN dataset = 'recall_details' THEN 'pending'
                   ELSE 'never_asked' END AS status
    FROM joined
)
SELECT vin, unit_number, dataset, status,
       CASE status
           WHEN 'not_applicable' THEN 'registered ' || CASE market WHEN 'international' THEN 'outside North America'
                                                                   ELSE 'in ' || market END
                                      || '; ' || dataset || ' is answered for ' || dataset_markets(dataset)
           WHEN 'pending' THEN coalesce(CASE WHEN left_waiting THEN pending_reason END,
                                        'the recall check counted recalls; their campaigns are not looked up yet')
           WHEN 'failed' THEN message END AS reason,
       CASE status WHEN 'pending' THEN CASE WHEN left_waiting THEN since ELSE counted_at END
                   WHEN 'failed' THEN first_failed_at END AS since,
       CASE WHEN status = 'pending' THEN CASE WHEN left_waiting THEN since_run_id ELSE counted_run_id END END
           AS since_run_id,
       CASE status WHEN 'pending' THEN CASE WHEN left_waiting THEN pending_run_id ELSE counted_run_id END
                   WHEN 'failed' THEN failed_run_id
                   WHEN 'answered' THEN answered_run_id WHEN 'no_data' THEN answered_run_id END AS run_id,
       answered_at,
       CASE WHEN status = 'failed' THEN http_status END AS http_status,
       CASE WHEN status = 'failed' THEN retryable END AS retryable,
       CASE WHEN status = 'failed' THEN attempts END AS attempts,
       market
FROM classified;
