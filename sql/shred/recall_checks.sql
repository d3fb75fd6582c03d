-- Per-VIN recall lookups -> `recall_checks`; a 404 "no data" is a check too, with no campaign listed.
SELECT vin, 'vin' AS checked_via, NULL::VARCHAR AS batch_id, NULL::BOOLEAN AS has_recalls,
    NULL::INTEGER AS recall_count, true AS campaigns_listed, fetched_at
FROM no_data
UNION ALL
SELECT vin, 'vin', NULL, n > 0, CAST(n AS INTEGER), true, fetched_at
FROM (SELECT vin, fetched_at, coalesce(shred_int(d.recall_count), len(shred_list(d.recalls))) AS n
      FROM (SELECT vin, fetched_at, json_transform(body, '{"data": {"recall_count": "JSON", "recalls": "JSON"}}').data AS d
            FROM found));
