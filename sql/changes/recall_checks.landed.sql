-- Closed recall campaigns: those this complete check just closed (recall_checks.sql sets `closed_at` to
-- the time of the check that no longer lists them: the VIN's own for a confirmed campaign). Read after that landing, so only the campaigns the
-- check closed; landing the check again finds the same ones, recorded once.
INSERT INTO changes BY NAME
SELECT c.run_id, r.vin, 'recalls' AS dataset, 'closed_recall' AS kind, r.nhtsa_campaign_number AS subject,
       'info' AS severity,
       json_object('component', r.component, 'summary', r.summary, 'park_it', r.park_it, 'park_outside', r.park_outside,
                   'first_seen_at', r.first_seen_at, 'matched_by', r.matched_by) AS before,
       NULL AS after, c.fetched_at, now() AS detected_at
FROM (SELECT DISTINCT vin, run_id, fetched_at FROM incoming WHERE campaigns_listed) AS c
JOIN recalls AS r ON r.vin = c.vin AND r.closed_at = c.fetched_at
ON CONFLICT DO NOTHING;
