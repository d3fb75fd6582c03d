-- /v2/marketvalue answers -> `market_values` rows (connectors/models/market_value.py,
-- staging.market_values_frame). Keyed by the day (UTC) and what was asked (the staged `request`).
SELECT vin, CAST(timezone('UTC', fetched_at) AS DATE) AS valued_on,
    request->>'state' AS state, TRY_CAST(request->>'mileage' AS BIGINT) AS mileage,
    -- Stored answers from before units were recorded were asked in miles.
    coalesce(nullif(request->>'mileage_unit', ''), CASE WHEN request->>'mileage' IS NOT NULL THEN 'mi' END) AS mileage_unit,
    request->>'condition' AS condition,
    CAST(shred_int(body->'model_year') AS INTEGER) AS model_year, shred_text(body->'make') AS make,
    shred_text(body->'model') AS model, shred_text(body->'series') AS series, shred_text(body->'style') AS style,
    shred_text(body->'uvc') AS uvc, shred_text(body->'publish_date') AS publish_date,
    shred_number(body->'retail') AS retail, shred_number(body->'trade_in') AS trade_in,
    shred_number(body->'rough_trade_in') AS rough_trade_in, shred_number(body->'average_trade_in') AS average_trade_in,
    shred_number(body->'loan_value') AS loan_value, shred_number(body->'msrp') AS msrp,
    shred_number(body->'retail_equipped') AS retail_equipped,
    -- The groups present, in the models' order; `base_<group>` etc., else the bare `base`.
    list_transform(
        list_filter(list_transform(
            ['whole_xclean', 'whole_clean', 'whole_avg', 'whole_rough', 'retail_xclean', 'retail_clean', 'retail_avg',
             'retail_rough', 'trade_in_clean', 'trade_in_avg', 'trade_in_rough'],
            lambda n: {'name': n, 'g': body->n}), lambda x: json_type(x.g) = 'OBJECT'),
        lambda x: {
            'kind': regexp_extract(x.name, '^(.*)_[^_]+$', 1), 'tier': regexp_extract(x.name, '_([^_]+)$', 1),
            'base': shred_number(CASE WHEN json_exists(x.g, '$.base_' || x.name) THEN x.g->('base_' || x.name) ELSE x.g->'base' END),
            'mileage': shred_number(CASE WHEN json_exists(x.g, '$.mileage_' || x.name) THEN x.g->('mileage_' || x.name) ELSE x.g->'mileage' END),
            'add_deduct': shred_number(CASE WHEN json_exists(x.g, '$.add_deduct_' || x.name) THEN x.g->('add_deduct_' || x.name) ELSE x.g->'add_deduct' END),
            'regional': shred_number(CASE WHEN json_exists(x.g, '$.regional_' || x.name) THEN x.g->('regional_' || x.name) ELSE x.g->'regional' END),
            'adjusted': shred_number(CASE WHEN json_exists(x.g, '$.adjusted_' || x.name) THEN x.g->('adjusted_' || x.name) ELSE x.g->'adjusted' END)
        }) AS valuation_groups,
    CASE WHEN json_type(body->'auction_values') = 'OBJECT' THEN {
        'low_auction_value': shred_number(body->'auction_values'->'low_auction_value'),
        'average_auction_value': shred_number(body->'auction_values'->'average_auction_value'),
        'high_auction_value': shred_number(body->'auction_values'->'high_auction_value'),
        'date_range': shred_text(body->'auction_values'->'date_range')} END AS auction_values,
    CAST(list_transform(shred_list(body->'mileage_list'), lambda b: {
        'model_year': shred_text(b->'model_year'), 'range_begin': CAST(shred_int(b->'range_begin') AS INTEGER),
        'range_end': CAST(shred_int(b->'range_end') AS INTEGER), 'xclean': shred_number(b->'xclean'),
        'clean': shred_number(b->'clean'), 'avg': shred_number(b->'avg'), 'rough': shred_number(b->'rough'),
        'finadv': shred_number(b->'finadv'), 'mileage_cat': shred_text(b->'mileage_cat')})
        AS STRUCT(model_year VARCHAR, range_begin INTEGER, range_end INTEGER, xclean DOUBLE, clean DOUBLE, avg DOUBLE,
                  rough DOUBLE, finadv DOUBLE, mileage_cat VARCHAR)[]) AS mileage_list,
    CAST(list_transform(shred_list(body->'add_deduct_list'), lambda d: {
        'uoc': shred_text(d->'uoc'), 'name': shred_text(d->'name'), 'xclean': shred_number(d->'xclean'),
        'clean': shred_number(d->'clean'), 'avg': shred_number(d->'avg'), 'rough': shred_number(d->'rough'),
        'auto': shred_text(d->'auto')})
        AS STRUCT(uoc VARCHAR, name VARCHAR, xclean DOUBLE, clean DOUBLE, avg DOUBLE, rough DOUBLE, auto VARCHAR)[])
        AS add_deduct_list,
    fetched_at
FROM found;
