-- New recall campaigns: listed for the VIN now, not open before (never seen, or closed since), when a
-- complete listing came before (recall_checks.campaigns_listed: a per-VIN lookup, or a batch count of 0).
-- A VIN's first listing is no change. Park-it campaigns are `park_now`, park-outside ones `park_outside`.
-- Runs before recall_checks.sql closes what the same chunk's check no longer lists (tasks/land/landing.py
-- lands recalls first).
INSERT INTO changes BY NAME
SELECT i.run_id, i.vin, 'recalls' AS dataset, 'new_recall' AS kind, i.nhtsa_campaign_number AS subject,
       CASE WHEN i.park_it THEN 'park_now' WHEN i.park_outside THEN 'park_outside' ELSE 'high' END AS severity,
       NULL AS before,
       json_object('component', i.component, 'summary', i.summary, 'consequence', i.consequence, 'remedy', i.remedy,
                   'park_it', i.park_it, 'park_outside', i.park_outside, 'over_the_air_update', i.over_the_air_update,
                   'manufacturer', i.manufacturer, 'report_received_date', i.report_received_date,
                   'matched_by', coalesce(i.matched_by, 'vin')) AS after,
       i.fetched_at, now() AS detected_at
FROM (SELECT * FROM incoming
      QUALIFY row_number() OVER (PARTITION BY vin, nhtsa_campaign_number ORDER BY run_seq DESC, fetched_at DESC) = 1) AS i
LEFT JOIN recalls AS r ON r.vin = i.vin AND r.nhtsa_campaign_number = i.nhtsa_campaign_number
-- (Before and since in the order answers arrived, run_seq then fetched_at; the check that closed a campaign is its
-- VIN's complete check at closed_at.)
WHERE (r.vin IS NULL OR r.closed_at IS NOT NULL AND (coalesce((SELECT max(c.run_seq) FROM recall_checks AS c WHERE c.vin = r.vin AND c.campaigns_listed
                                   AND c.fetched_at = r.closed_at), 0), r.closed_at) < (i.run_seq, i.fetched_at))
  AND EXISTS (SELECT 1 FROM recall_checks AS c WHERE c.vin = i.vin AND c.campaigns_listed
              AND (c.run_seq, c.fetched_at) < (i.run_seq, i.fetched_at))
ON CONFLICT DO NOTHING;
