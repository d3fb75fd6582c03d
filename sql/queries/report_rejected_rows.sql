-- Fleet-file rows the latest refresh could not use (rejected_rows of the newest refresh that read a file), at most
-- $limit rows; `total` counts them all.
WITH latest AS (
    SELECT run_id FROM runs
    WHERE kind = 'refresh' AND status NOT IN ('planned', 'refused') AND rows_in IS NOT NULL
    ORDER BY started_at DESC LIMIT 1
)
SELECT source_file, source_row, raw_value, reason, count(*) OVER () AS total
FROM rejected_rows SEMI JOIN latest USING (run_id)
ORDER BY source_file, source_row
LIMIT $limit;
