-- A model's campaign listing (`/v1/recalls-ymm`), staged once per VIN it settled (its batch count is the listing's
-- campaign count) -> `recall_checks`: checked by model, every campaign listed.
SELECT vin, 'model' AS checked_via, NULL::VARCHAR AS batch_id, true AS has_recalls,
    CAST(len(shred_list(json_transform(body, '{"data": {"recalls": "JSON"}}').data.recalls)) AS INTEGER) AS recall_count,
    true AS campaigns_listed, fetched_at
FROM found;
