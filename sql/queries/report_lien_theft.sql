-- Roster vehicles per lien/theft state now (lien_theft_records), not per past event: stolen and not
-- recovered, recovered, active lien, liens all released, and those whose records cannot tell.
WITH per_vehicle AS (
    SELECT vin,
           bool_or(event_kind = 'theft') AS theft, bool_or(coalesce(stolen_not_recovered, false)) AS stolen,
           bool_or(event_kind = 'theft' AND stolen_not_recovered IS NULL) AS theft_unknown,
           bool_or(event_kind = 'lien') AS lien, bool_or(coalesce(active, false)) AS active,
           bool_or(event_kind = 'lien' AND active IS NULL) AS lien_unknown
    FROM lien_theft_records SEMI JOIN vehicles USING (vin)
    GROUP BY vin
), states AS (
    SELECT 1 AS rank, 'stolen, not recovered' AS state, true AS current, count(*) FILTER (WHERE stolen) AS vehicles
    FROM per_vehicle
    UNION ALL SELECT 2, 'active lien', true, count(*) FILTER (WHERE active) FROM per_vehicle
    UNION ALL SELECT 3, 'theft: cannot tell if recovered', true, count(*) FILTER (WHERE theft_unknown AND NOT stolen)
    FROM per_vehicle
    UNION ALL SELECT 4, 'lien: cannot tell if released', true, count(*) FILTER (WHERE lien_unknown AND NOT active)
    FROM per_vehicle
    UNION ALL SELECT 5, 'theft recovered (past)', false, count(*) FILTER (WHERE theft AND NOT stolen AND NOT theft_unknown)
    FROM per_vehicle
    UNION ALL SELECT 6, 'liens released (past)', false, count(*) FILTER (WHERE lien AND NOT active AND NOT lien_unknown)
    FROM per_vehicle
)
SELECT state, current, vehicles FROM states WHERE vehicles > 0 ORDER BY rank;
