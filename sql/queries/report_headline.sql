-- The report's headline figures, one row, each a current state. Open recalls are confirmed ones
-- (vehicle_overview.open_recall_count; listed_open_recalls of them have their campaign in open_recalls);
-- vehicles to park have a confirmed open campaign saying park it, or park it outside; likely_to_park are the
-- others with such a campaign listed only for their model (`--recall-details model`). Stolen and liens are
-- what holds now (lien_theft_records: a theft not recovered, a lien not released), not any past event:
-- *_undecided are vehicles whose records cannot tell (a release or recovery without a date or a name);
-- theft_vehicles and lien_vehicles count any record ever, for the detail line.
-- Unknown is not zero: a figure whose dataset no roster vehicle has an answer for is NULL (the report shows "–"),
-- not 0; *_checked say how many vehicles the figure covers (an empty roster is 0 of 0: nothing unknown).
WITH overview AS (
    SELECT
        count(*) AS vehicles,
        count(retail) AS valued_vehicles,
        -- DOUBLE for the report's charts and cards (JSON numbers); the database keeps money DECIMAL.
        CAST(sum(retail) AS DOUBLE) AS total_retail,
        CAST(sum(trade_in) AS DOUBLE) AS total_trade_in,
        max(valued_on) AS latest_valued_on,
        count(open_recall_count) AS recalls_checked,
        count(title_brands) AS history_checked,
        count(active_liens) AS lien_theft_checked,
        CASE WHEN count(*) = 0 THEN 0 ELSE CAST(sum(open_recall_count) AS BIGINT) END AS open_recalls,
        CASE WHEN count(*) = 0 OR count(open_recall_count) > 0
             THEN count(*) FILTER (WHERE open_recall_count > 0) END AS vehicles_with_open_recalls,
        CASE WHEN count(*) = 0 OR count(title_brands) > 0
             THEN count(*) FILTER (WHERE len(title_brands) > 0) END AS title_branded_vehicles,
        CASE WHEN count(*) = 0 OR count(active_liens) > 0
             THEN count(*) FILTER (WHERE stolen_not_recovered) END AS stolen_vehicles,
        CASE WHEN count(*) = 0 OR count(active_liens) > 0
             THEN count(*) FILTER (WHERE active_liens > 0) END AS active_lien_vehicles,
        -- Whether any vehicle's recalls were checked (to park: known only then).
        count(*) = 0 OR count(recall_status) FILTER (WHERE recall_status <> 'not_checked') > 0 AS recalls_known
    FROM vehicle_overview
), listed AS (
    SELECT count(*) FILTER (WHERE matched_by = 'vin') AS listed_open_recalls
    FROM open_recalls SEMI JOIN vehicles USING (vin)
), park AS (
    SELECT count(*) FILTER (WHERE confirmed) AS vehicles_to_park, count(*) FILTER (WHERE NOT confirmed) AS likely_to_park
    FROM (
        SELECT vin, bool_or(matched_by = 'vin') AS confirmed
        FROM open_recalls SEMI JOIN vehicles USING (vin)
        WHERE park_it OR park_outside
        GROUP BY vin
    )
), lien_theft AS (
    SELECT count(*) FILTER (WHERE theft) AS theft_vehicles, count(*) FILTER (WHERE lien) AS lien_vehicles,
           count(*) FILTER (WHERE theft_unknown AND NOT stolen) AS stolen_undecided,
           count(*) FILTER (WHERE lien_unknown AND NOT active) AS lien_undecided
    FROM (
        SELECT vin, bool_or(event_kind = 'theft') AS theft, bool_or(event_kind = 'lien') AS lien,
               bool_or(coalesce(stolen_not_recovered, false)) AS stolen, bool_or(coalesce(active, false)) AS active,
               bool_or(event_kind = 'theft' AND stolen_not_recovered IS NULL) AS theft_unknown,
               bool_or(event_kind = 'lien' AND active IS NULL) AS lien_unknown
        FROM lien_theft_records SEMI JOIN vehicles USING (vin)
        GROUP BY vin
    )
)
SELECT * EXCLUDE (recalls_known, vehicles_to_park, likely_to_park),
       CASE WHEN recalls_known THEN vehicles_to_park END AS vehicles_to_park,
       CASE WHEN recalls_known THEN likely_to_park END AS likely_to_park
FROM overview, listed, park, lien_theft;
