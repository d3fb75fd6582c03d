-- /v1/recalls answers -> one `recalls` row per listed campaign (a campaign without a number is skipped); a model
-- listing (`/v1/recalls-ymm`, the same shape) staged once per VIN it settled gives its campaigns to each, matched by model.
-- The body is parsed once (json_transform), each campaign once more.
SELECT vin, shred_text(r->'nhtsa_campaign_number') AS nhtsa_campaign_number,
    shred_text(r->'manufacturer') AS manufacturer, shred_bool(r->'park_it') AS park_it,
    shred_bool(r->'park_outside') AS park_outside, shred_bool(r->'over_the_air_update') AS over_the_air_update,
    shred_dmy_date(r->'report_received_date') AS report_received_date, shred_text(r->'component') AS component,
    shred_text(r->'summary') AS summary, shred_text(r->'consequence') AS consequence,
    shred_text(r->'remedy') AS remedy, shred_text(r->'notes') AS notes, CAST($matched_by AS VARCHAR) AS matched_by, fetched_at
FROM (SELECT vin, fetched_at, unnest(shred_list(json_transform(body, '{"data": {"recalls": "JSON"}}').data.recalls)) AS r
      FROM found)
WHERE coalesce(shred_text(r->'nhtsa_campaign_number'), '') <> '';
