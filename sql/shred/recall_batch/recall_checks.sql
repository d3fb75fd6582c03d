-- A recall batch's results answer (view `batch_results`, sql/shred/_answers.sql) -> a `recall_checks` row per VIN it
-- lists: its count, and whether its campaigns are all known (none to list).
SELECT vin, 'batch' AS checked_via, CAST($batch_id AS VARCHAR) AS batch_id, has_recalls,
    CAST(recall_count AS INTEGER) AS recall_count, recall_count = 0 AS campaigns_listed, fetched_at
FROM batch_results;
