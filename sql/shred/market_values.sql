-- /v2/marketvalue answers -> `market_values` rows (connectors/models/market_value.py,
-- staging.market_values_frame). Keyed by the day (UTC) and what was asked (the staged `request`, which also
-- says where its mileage came from). The body is parsed once (json_transform) into the members read.
SELECT vin, CAST(timezone('UTC', fetched_at) AS DATE) AS valued_on,
    request->>'state' AS state, TRY_CAST(request->>'mileage' AS BIGINT) AS mileage,
    -- Stored answers from before units were recorded were asked in miles.
    coalesce(nullif(request->>'mileage_unit', ''), CASE WHEN request->>'mileage' IS NOT NULL THEN 'mi' END) AS mileage_unit,
    request->>'condition' AS condition,
    -- Where the mileage came from (fleet_file | history) and the market its unit follows: tasks/datasets.py.
    request->>'mileage_source' AS mileage_source, request->>'country' AS country,
    CAST(shred_int(b.model_year) AS INTEGER) AS model_year, shred_text(b.make) AS make,
    shred_text(b.model) AS model, shred_text(b.series) AS series, shred_text(b.style) AS style,
    shred_text(b.uvc) AS uvc, shred_day(b.publish_date) AS publish_date,
    shred_money(b.retail) AS retail, shred_money(b.trade_in) AS trade_in,
    shred_money(b.rough_trade_in) AS rough_trade_in, shred_money(b.average_trade_in) AS average_trade_in,
    shred_money(b.loan_value) AS loan_value, shred_money(b.msrp) AS msrp,
    shred_money(b.retail_equipped) AS retail_equipped,
    -- The groups present, in the models' order; `base_<group>` etc., else the bare `base`.
    list_transform(
        list_filter([
            {'name': 'whole_xclean', 'g': b.whole_xclean}, {'name': 'whole_clean', 'g': b.whole_clean},
            {'name': 'whole_avg', 'g': b.whole_avg}, {'name': 'whole_rough', 'g': b.whole_rough},
            {'name': 'retail_xclean', 'g': b.retail_xclean}, {'name': 'retail_clean', 'g': b.retail_clean},
            {'name': 'retail_avg', 'g': b.retail_avg}, {'name': 'retail_rough', 'g': b.retail_rough},
            {'name': 'trade_in_clean', 'g': b.trade_in_clean}, {'name': 'trade_in_avg', 'g': b.trade_in_avg},
            {'name': 'trade_in_rough', 'g': b.trade_in_rough}],
            lambda x: starts_with(x.g, '{')),
        lambda x: {
            'kind': regexp_extract(x.name, '^(.*)_[^_]+$', 1), 'tier': regexp_extract(x.name, '_([^_]+)$', 1),
            'base': shred_money(CASE WHEN json_exists(x.g, '$.base_' || x.name) THEN x.g->('base_' || x.name) ELSE x.g->'base' END),
            'mileage': shred_money(CASE WHEN json_exists(x.g, '$.mileage_' || x.name) THEN x.g->('mileage_' || x.name) ELSE x.g->'mileage' END),
            'add_deduct': shred_money(CASE WHEN json_exists(x.g, '$.add_deduct_' || x.name) THEN x.g->('add_deduct_' || x.name) ELSE x.g->'add_deduct' END),
            'regional': shred_money(CASE WHEN json_exists(x.g, '$.regional_' || x.name) THEN x.g->('regional_' || x.name) ELSE x.g->'regional' END),
            'adjusted': shred_money(CASE WHEN json_exists(x.g, '$.adjusted_' || x.name) THEN x.g->('adjusted_' || x.name) ELSE x.g->'adjusted' END)
        }) AS valuation_groups,
    CASE WHEN json_type(b.auction_values) = 'OBJECT' THEN {
        'low_auction_value': shred_money(b.auction_values->'low_auction_value'),
        'average_auction_value': shred_money(b.auction_values->'average_auction_value'),
        'high_auction_value': shred_money(b.auction_values->'high_auction_value'),
        'date_range': shred_text(b.auction_values->'date_range')} END AS auction_values,
    CAST(list_transform(shred_list(b.mileage_list), lambda b: {
        'model_year': shred_text(b->'model_year'), 'range_begin': CAST(shred_int(b->'range_begin') AS INTEGER),
        'range_end': CAST(shred_int(b->'range_end') AS INTEGER), 'xclean': shred_money(b->'xclean'),
        'clean': shred_money(b->'clean'), 'avg': shred_money(b->'avg'), 'rough': shred_money(b->'rough'),
        'finadv': shred_money(b->'finadv'), 'mileage_cat': shred_text(b->'mileage_cat')})
        AS STRUCT(model_year VARCHAR, range_begin INTEGER, range_end INTEGER, xclean DECIMAL(12,2), clean DECIMAL(12,2),
                  avg DECIMAL(12,2), rough DECIMAL(12,2), finadv DECIMAL(12,2), mileage_cat VARCHAR)[]) AS mileage_list,
    CAST(list_transform(shred_list(b.add_deduct_list), lambda d: {
        'uoc': shred_text(d->'uoc'), 'name': shred_text(d->'name'), 'xclean': shred_money(d->'xclean'),
        'clean': shred_money(d->'clean'), 'avg': shred_money(d->'avg'), 'rough': shred_money(d->'rough'),
        'auto': shred_text(d->'auto')})
        AS STRUCT(uoc VARCHAR, name VARCHAR, xclean DECIMAL(12,2), clean DECIMAL(12,2), avg DECIMAL(12,2),
                  rough DECIMAL(12,2), auto VARCHAR)[])
        AS add_deduct_list,
    fetched_at
FROM (SELECT vin, fetched_at, request, json_transform(body, '{"model_year": "JSON", "make": "JSON", "model": "JSON", "series": "JSON", "style": "JSON", "uvc": "JSON", "publish_date": "JSON", "retail": "JSON", "trade_in": "JSON", "rough_trade_in": "JSON", "average_trade_in": "JSON", "loan_value": "JSON", "msrp": "JSON", "retail_equipped": "JSON", "whole_xclean": "JSON", "whole_clean": "JSON", "whole_avg": "JSON", "whole_rough": "JSON", "retail_xclean": "JSON", "retail_clean": "JSON", "retail_avg": "JSON", "retail_rough": "JSON", "trade_in_clean": "JSON", "trade_in_avg": "JSON", "trade_in_rough": "JSON", "auction_values": "JSON", "mileage_list": "JSON", "add_deduct_list": "JSON"}') AS b
      FROM found);
