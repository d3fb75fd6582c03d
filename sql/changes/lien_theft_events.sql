-- Lien and theft events new in the newest report, and liens gone from it (released), compared with the
-- events held from the VIN's previous answer (fetch_status; "no data" = none). A report with no events
-- at all lands no rows here: fetch_status.sql's changes release its liens.
-- (Previous and newer in the order answers arrived: run_seq, then fetched_at.)
CREATE OR REPLACE TEMP TABLE lien_theft_answers AS
SELECT i.run_id, i.vin, i.fetched_at, i.run_seq
FROM (SELECT vin, arg_max(run_id, fetched_at) AS run_id, max(fetched_at) AS fetched_at, max(run_seq) AS run_seq
      FROM incoming GROUP BY vin) AS i
JOIN fetch_status AS f ON f.vin = i.vin AND f.dataset = 'lien_theft' AND (f.run_seq, f.fetched_at) < (i.run_seq, i.fetched_at);

INSERT INTO changes BY NAME
SELECT a.run_id, a.vin, 'lien_theft' AS dataset,
       CASE WHEN lower(i.event) LIKE '%release%' THEN 'released_lien'
            WHEN lower(i.event) LIKE '%recover%' THEN 'recovered_theft'
            WHEN lower(i.event) LIKE '%theft%' OR lower(i.event) LIKE '%stolen%' THEN 'new_theft'
            WHEN lower(i.event) LIKE '%lien%' THEN 'new_lien'
            ELSE 'new_lien_theft_event' END AS kind,
       concat_ws(': ', concat_ws(' ', i.event, i.location), nullif(array_to_string(i.details_list, '; '), '')) AS subject,
       CASE WHEN (lower(i.event) LIKE '%theft%' OR lower(i.event) LIKE '%stolen%' OR lower(i.event) LIKE '%lien%')
                 AND lower(i.event) NOT LIKE '%release%' AND lower(i.event) NOT LIKE '%recover%'
            THEN 'high' ELSE 'info' END AS severity,
       NULL AS before, json_object('event', i.event, 'location', i.location, 'details_list', i.details_list) AS after,
       a.fetched_at, now() AS detected_at
FROM lien_theft_answers AS a
JOIN incoming AS i ON i.vin = a.vin AND i.fetched_at = a.fetched_at
WHERE NOT EXISTS (SELECT 1 FROM lien_theft_events AS e
                  WHERE e.vin = i.vin AND (e.run_seq, e.fetched_at) < (a.run_seq, a.fetched_at)
                    AND e.event IS NOT DISTINCT FROM i.event
                    AND e.location IS NOT DISTINCT FROM i.location AND e.details_list IS NOT DISTINCT FROM i.details_list)
ON CONFLICT DO NOTHING;

INSERT INTO changes BY NAME
SELECT a.run_id, a.vin, 'lien_theft' AS dataset, 'released_lien' AS kind,
       concat_ws(': ', concat_ws(' ', e.event, e.location), nullif(array_to_string(e.details_list, '; '), '')) AS subject,
       'info' AS severity,
       json_object('event', e.event, 'location', e.location, 'details_list', e.details_list) AS before, NULL AS after,
       a.fetched_at, now() AS detected_at
FROM lien_theft_answers AS a
JOIN lien_theft_events AS e ON e.vin = a.vin AND (e.run_seq, e.fetched_at) < (a.run_seq, a.fetched_at)
WHERE lower(e.event) LIKE '%lien%' AND lower(e.event) NOT LIKE '%release%'
  AND NOT EXISTS (SELECT 1 FROM incoming AS i
                  WHERE i.vin = e.vin AND i.fetched_at = a.fetched_at AND i.event IS NOT DISTINCT FROM e.event
                    AND i.location IS NOT DISTINCT FROM e.location AND i.details_list IS NOT DISTINCT FROM e.details_list)
ON CONFLICT DO NOTHING;

DROP TABLE lien_theft_answers;
