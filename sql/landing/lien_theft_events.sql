-- Each report replaces the VIN's events, unless what we hold is newer.
-- An answer older than the VIN's newest (a late replay, a re-parse) lands nothing, even when the newest was
-- "no data" (see fetch_status.sql).
DELETE FROM incoming
WHERE EXISTS (SELECT 1 FROM fetch_status AS f
              WHERE f.vin = incoming.vin AND f.dataset = 'lien_theft'
                AND (f.run_seq, f.fetched_at) > (incoming.run_seq, incoming.fetched_at));

CREATE TEMP TABLE newest_reports AS
SELECT i.vin, max(i.run_seq) AS run_seq, max(i.fetched_at) AS fetched_at
FROM incoming AS i
GROUP BY i.vin;

-- Not newer (in the order answers arrived) than the events held: nothing of it lands.
DELETE FROM newest_reports
WHERE EXISTS (SELECT 1 FROM lien_theft_events AS e
              WHERE e.vin = newest_reports.vin AND (e.run_seq, e.fetched_at) > (newest_reports.run_seq, newest_reports.fetched_at));

DELETE FROM lien_theft_events WHERE vin IN (SELECT vin FROM newest_reports);

INSERT INTO lien_theft_events BY NAME
SELECT i.* FROM incoming AS i JOIN newest_reports AS n ON i.vin = n.vin AND i.fetched_at = n.fetched_at
QUALIFY row_number() OVER (PARTITION BY i.vin, i.event_index ORDER BY i.event) = 1;

DROP TABLE newest_reports;
