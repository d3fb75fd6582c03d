-- Open recalls a vehicle's latest check counts (vehicle_overview.open_recall_count) beyond the campaigns listed
-- for its VIN (open_recalls, matched_by 'vin'): `by_model` those of vehicles whose campaigns are listed for
-- their model only (`--recall-details model`: likely, not confirmed), `unlisted` those with no listing at all.
WITH listed AS (
    SELECT vin, count(*) FILTER (WHERE matched_by = 'vin') AS by_vin, count(*) FILTER (WHERE matched_by = 'model') AS by_model
    FROM open_recalls GROUP BY vin
), beyond AS (
    SELECT o.open_recall_count - coalesce(l.by_vin, 0) AS recalls, coalesce(l.by_model, 0) > 0 AS model_listed
    FROM vehicle_overview AS o LEFT JOIN listed AS l USING (vin)
    WHERE o.open_recall_count > coalesce(l.by_vin, 0)
)
SELECT CAST(coalesce(sum(recalls) FILTER (WHERE NOT model_listed), 0) AS BIGINT) AS unlisted,
       count(*) FILTER (WHERE NOT model_listed) AS unlisted_vehicles,
       CAST(coalesce(sum(recalls) FILTER (WHERE model_listed), 0) AS BIGINT) AS by_model,
       count(*) FILTER (WHERE model_listed) AS by_model_vehicles
FROM beyond;
