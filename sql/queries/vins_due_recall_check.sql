-- Roster VINs never checked for recalls, or last checked before $older_than.
SELECT v.vin, max(c.fetched_at) AS last_checked_at
FROM vehicles AS v LEFT JOIN recall_checks AS c USING (vin)
GROUP BY ALL
HAVING max(c.fetched_at) IS NULL OR max(c.fetched_at) < $older_than::TIMESTAMPTZ
ORDER BY v.vin;
