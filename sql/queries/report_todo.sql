-- The report's to-do list, one row per roster vehicle and reason (mileage conflicts come from
-- report_mileage_conflicts): what holds now, each with the reason in words and the date it dates from.
--   park now      a confirmed open campaign (matched for the VIN) says park it: do not drive
--   park outside  only park-outside campaigns (away from buildings: a fire risk), no park-it one
--   stolen        a theft not recovered (lien_theft_records)
--   active lien   a lien not released (lien_theft_records)
--   title brand   a title brand new in a history answer fetched since $brands_since (the change feed),
--                 still on the latest report
WITH park AS (
    SELECT vin, CASE WHEN bool_or(park_it) THEN 1 ELSE 2 END AS priority,
           CASE WHEN bool_or(park_it) THEN 'park now' ELSE 'park outside' END AS category,
           string_agg(nhtsa_campaign_number || ' ' || coalesce(component, '(component not given)') || ': '
                      || CASE WHEN park_it THEN 'do not drive' ELSE 'park outside, away from buildings' END,
                      '; ' ORDER BY park_it DESC, nhtsa_campaign_number) AS reason,
           min(coalesce(report_received_date, CAST(first_seen_at AS DATE))) AS since
    FROM open_recalls
    WHERE matched_by = 'vin' AND (park_it OR park_outside)
    GROUP BY vin
), stolen AS (
    SELECT vin, 3 AS priority, 'stolen' AS category,
           string_agg(concat_ws(' ', 'theft reported', 'on ' || CAST(event_date AS VARCHAR), 'in ' || location,
                                '(' || agency || ')'), '; ' ORDER BY event_date, event_index) || '; not recovered'
               AS reason,
           min(event_date) AS since
    FROM lien_theft_records
    WHERE stolen_not_recovered
    GROUP BY vin
), liens AS (
    SELECT vin, 4 AS priority, 'active lien' AS category,
           string_agg(concat_ws(' ', 'lien', 'held by ' || lienholder, 'since ' || CAST(event_date AS VARCHAR)),
                      '; ' ORDER BY event_date, event_index) || '; not released' AS reason,
           min(event_date) AS since
    FROM lien_theft_records
    WHERE active
    GROUP BY vin
), brands AS (
    SELECT vin, 5 AS priority, 'title brand' AS category,
           'title newly branded ' || string_agg(DISTINCT subject, ', ' ORDER BY subject) AS reason,
           CAST(min(fetched_at) AS DATE) AS since
    FROM changes AS c
    WHERE kind = 'new_title_brand' AND fetched_at >= $brands_since::TIMESTAMPTZ
      -- still on the title (a brand the latest report no longer carries is no longer to do)
      AND EXISTS (SELECT 1 FROM history_reports AS h WHERE h.vin = c.vin AND list_contains(h.title_brands, c.subject))
    GROUP BY vin
), todo AS (
    SELECT * FROM park UNION ALL SELECT * FROM stolen UNION ALL SELECT * FROM liens UNION ALL SELECT * FROM brands
)
SELECT t.priority, t.category, t.vin, o.unit_number, o.plate, o.fleet, o.year, o.make, o.model, t.reason, t.since
FROM todo AS t
JOIN vehicle_overview AS o USING (vin)
ORDER BY t.priority, t.since NULLS LAST, o.unit_number, t.vin;
