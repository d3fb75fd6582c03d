-- A newer lien/theft answer with no events, or "no lien or theft data": the liens held are released.
-- (fetch_status.sql then removes the events; a report that has events is compared in lien_theft_events.sql,
-- which has already replaced them, so only events older than the answer are left here.)
INSERT INTO changes BY NAME
SELECT i.run_id, e.vin, 'lien_theft' AS dataset, 'released_lien' AS kind,
       concat_ws(': ', concat_ws(' ', e.event, e.location), nullif(array_to_string(e.details_list, '; '), '')) AS subject,
       'info' AS severity,
       json_object('event', e.event, 'location', e.location, 'details_list', e.details_list) AS before, NULL AS after,
       i.fetched_at, now() AS detected_at
FROM (SELECT * FROM incoming WHERE dataset = 'lien_theft'
      QUALIFY row_number() OVER (PARTITION BY vin ORDER BY run_seq DESC, fetched_at DESC) = 1) AS i
JOIN lien_theft_events AS e ON e.vin = i.vin AND (e.run_seq, e.fetched_at) < (i.run_seq, i.fetched_at)
WHERE lower(e.event) LIKE '%lien%' AND lower(e.event) NOT LIKE '%release%'
ON CONFLICT DO NOTHING;
