-- Roster VINs whose latest recall check found recalls but no complete campaign listing has followed it (latest and
-- followed in the order answers arrived: run_seq, then fetched_at),
-- with their year/make/model from specs (for grouping by model when that is cheaper than per VIN).
-- `$batch_id`: only the VINs that recall batch checked (details start as each batch lands); NULL: all.
WITH checked AS (
    SELECT DISTINCT vin FROM recall_checks WHERE batch_id = $batch_id
), latest_count AS (
    SELECT vin, arg_max(recall_count, (run_seq, fetched_at)) AS recall_count, max((run_seq, fetched_at)) AS checked_at
    FROM recall_checks WHERE NOT campaigns_listed AND ($batch_id IS NULL OR vin IN (SELECT vin FROM checked))
    GROUP BY vin
), latest_listing AS (
    SELECT vin, max((run_seq, fetched_at)) AS listed_at FROM recall_checks
    WHERE campaigns_listed AND ($batch_id IS NULL OR vin IN (SELECT vin FROM checked)) GROUP BY vin
)
SELECT c.vin, c.recall_count, s.year, s.make, s.model
FROM latest_count AS c
JOIN vehicles AS v ON v.vin = c.vin AND v.run_id = $run_id
LEFT JOIN latest_listing AS l ON l.vin = c.vin
LEFT JOIN specs AS s ON s.vin = c.vin
WHERE c.recall_count > 0 AND (l.listed_at IS NULL OR l.listed_at < c.checked_at)
ORDER BY c.vin;
