-- /v2/marketvalue answers' `trade_in_values` ([{date, value}]) -> `trade_in_history` rows: one per VIN and month
-- the answer lists, observed when it answered (fetched_at), with what the valuation asked (staging.trade_in_history_frame gives the same rows). The
-- month is read from the date's text as sent (`YYYY-MM...`, no time zone shift); an item without a month or a
-- number is skipped; a month listed twice in one answer: its last item.
SELECT vin, month, trade_in, valued_on, state, mileage, mileage_unit, condition, mileage_source, fetched_at
FROM (
    SELECT vin, fetched_at, valued_on, state, mileage, mileage_unit, condition, mileage_source, position,
        CAST(try_strptime(regexp_extract(coalesce(shred_text(item->'date'), ''), '^\s*(\d{4}-\d{2})', 1) || '-01',
                          '%Y-%m-%d') AS DATE) AS month,
        shred_money(item->'value') AS trade_in
    FROM (
        SELECT vin, fetched_at, CAST(timezone('UTC', fetched_at) AS DATE) AS valued_on,
            request->>'state' AS state, TRY_CAST(request->>'mileage' AS BIGINT) AS mileage,
            -- Stored answers from before units were recorded were asked in miles.
            coalesce(nullif(request->>'mileage_unit', ''), CASE WHEN request->>'mileage' IS NOT NULL THEN 'mi' END)
                AS mileage_unit,
            request->>'condition' AS condition, request->>'mileage_source' AS mileage_source,
            unnest(list_transform(shred_list(body->'trade_in_values'), lambda t, i: {position: i, item: t}),
                   recursive := true)
        FROM found
    )
)
WHERE month IS NOT NULL AND trade_in IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY vin, fetched_at, month ORDER BY position DESC) = 1;
