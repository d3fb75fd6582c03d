-- Lien and theft events of the roster's latest reports, per event type.
SELECT coalesce(event, '(not given)') AS event, count(*) AS events, count(DISTINCT vin) AS vehicles
FROM lien_theft_events SEMI JOIN vehicles USING (vin)
GROUP BY ALL ORDER BY vehicles DESC, event;
