-- /v2/marketvalue answers -> `market_values` rows (connectors/models/market_value.py,
-- staging.market_values_frame). Keyed by the day (UTC) and what was asked (the staged `request`, which also
-- says where its mileage came from). The body is parsed once (json_transform) into the members read, and each
-- leaf picked once (the middle SELECT): the shred macros name their argument many times, and a JSON extraction
-- there would be made as often (0.7 ms an answer before).
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
    -- The groups present, in the models' order; `base_<group>` etc., else the bare `base` (already chosen below).
    list_transform(list_transform(groups, lambda x: {'kind': x.kind, 'tier': x.tier,
            'base': coalesce(x.parts[1], x.parts[2]), 'mileage': coalesce(x.parts[3], x.parts[4]),
            'add_deduct': coalesce(x.parts[5], x.parts[6]), 'regional': coalesce(x.parts[7], x.parts[8]),
            'adjusted': coalesce(x.parts[9], x.parts[10])}),
        lambda x: {'kind': x.kind, 'tier': x.tier, 'base': shred_money(x.base), 'mileage': shred_money(x.mileage),
            'add_deduct': shred_money(x.add_deduct), 'regional': shred_money(x.regional),
            'adjusted': shred_money(x.adjusted)}) AS valuation_groups,
    CASE WHEN json_type(b.auction_values) = 'OBJECT' THEN {
        'low_auction_value': shred_money(auction.low_auction_value),
        'average_auction_value': shred_money(auction.average_auction_value),
        'high_auction_value': shred_money(auction.high_auction_value),
        'date_range': shred_text(auction.date_range)} END AS auction_values,
    CAST(list_transform(mileage_bands, lambda band: {
        'model_year': shred_text(band.model_year), 'range_begin': CAST(shred_int(band.range_begin) AS INTEGER),
        'range_end': CAST(shred_int(band.range_end) AS INTEGER), 'xclean': shred_money(band.xclean),
        'clean': shred_money(band.clean), 'avg': shred_money(band.avg), 'rough': shred_money(band.rough),
        'finadv': shred_money(band.finadv), 'mileage_cat': shred_text(band.mileage_cat)})
        AS STRUCT(model_year VARCHAR, range_begin INTEGER, range_end INTEGER, xclean DECIMAL(12,2), clean DECIMAL(12,2),
                  avg DECIMAL(12,2), rough DECIMAL(12,2), finadv DECIMAL(12,2), mileage_cat VARCHAR)[]) AS mileage_list,
    CAST(list_transform(add_deducts, lambda item: {
        'uoc': shred_text(item.uoc), 'name': shred_text(item.name), 'xclean': shred_money(item.xclean),
        'clean': shred_money(item.clean), 'avg': shred_money(item.avg), 'rough': shred_money(item.rough),
        'auto': shred_text(item.auto)})
        AS STRUCT(uoc VARCHAR, name VARCHAR, xclean DECIMAL(12,2), clean DECIMAL(12,2), avg DECIMAL(12,2),
                  rough DECIMAL(12,2), auto VARCHAR)[])
        AS add_deduct_list,
    fetched_at
FROM (SELECT vin, fetched_at, request, b,
          -- Each group parsed once for its ten possible parts (json_extract with a list of paths): a part under
          -- the group's own name (`base_whole_xclean`) wins over the bare one, null or not (a missing path is
          -- NULL, a null one JSON null).
          list_filter([
              {'kind': 'whole', 'tier': 'xclean', 'g': b.whole_xclean,
               'parts': json_extract(b.whole_xclean, ['$.base_whole_xclean', '$.base', '$.mileage_whole_xclean', '$.mileage', '$.add_deduct_whole_xclean', '$.add_deduct', '$.regional_whole_xclean', '$.regional', '$.adjusted_whole_xclean', '$.adjusted'])},
              {'kind': 'whole', 'tier': 'clean', 'g': b.whole_clean,
               'parts': json_extract(b.whole_clean, ['$.base_whole_clean', '$.base', '$.mileage_whole_clean', '$.mileage', '$.add_deduct_whole_clean', '$.add_deduct', '$.regional_whole_clean', '$.regional', '$.adjusted_whole_clean', '$.adjusted'])},
              {'kind': 'whole', 'tier': 'avg', 'g': b.whole_avg,
               'parts': json_extract(b.whole_avg, ['$.base_whole_avg', '$.base', '$.mileage_whole_avg', '$.mileage', '$.add_deduct_whole_avg', '$.add_deduct', '$.regional_whole_avg', '$.regional', '$.adjusted_whole_avg', '$.adjusted'])},
              {'kind': 'whole', 'tier': 'rough', 'g': b.whole_rough,
               'parts': json_extract(b.whole_rough, ['$.base_whole_rough', '$.base', '$.mileage_whole_rough', '$.mileage', '$.add_deduct_whole_rough', '$.add_deduct', '$.regional_whole_rough', '$.regional', '$.adjusted_whole_rough', '$.adjusted'])},
              {'kind': 'retail', 'tier': 'xclean', 'g': b.retail_xclean,
               'parts': json_extract(b.retail_xclean, ['$.base_retail_xclean', '$.base', '$.mileage_retail_xclean', '$.mileage', '$.add_deduct_retail_xclean', '$.add_deduct', '$.regional_retail_xclean', '$.regional', '$.adjusted_retail_xclean', '$.adjusted'])},
              {'kind': 'retail', 'tier': 'clean', 'g': b.retail_clean,
               'parts': json_extract(b.retail_clean, ['$.base_retail_clean', '$.base', '$.mileage_retail_clean', '$.mileage', '$.add_deduct_retail_clean', '$.add_deduct', '$.regional_retail_clean', '$.regional', '$.adjusted_retail_clean', '$.adjusted'])},
              {'kind': 'retail', 'tier': 'avg', 'g': b.retail_avg,
               'parts': json_extract(b.retail_avg, ['$.base_retail_avg', '$.base', '$.mileage_retail_avg', '$.mileage', '$.add_deduct_retail_avg', '$.add_deduct', '$.regional_retail_avg', '$.regional', '$.adjusted_retail_avg', '$.adjusted'])},
              {'kind': 'retail', 'tier': 'rough', 'g': b.retail_rough,
               'parts': json_extract(b.retail_rough, ['$.base_retail_rough', '$.base', '$.mileage_retail_rough', '$.mileage', '$.add_deduct_retail_rough', '$.add_deduct', '$.regional_retail_rough', '$.regional', '$.adjusted_retail_rough', '$.adjusted'])},
              {'kind': 'trade_in', 'tier': 'clean', 'g': b.trade_in_clean,
               'parts': json_extract(b.trade_in_clean, ['$.base_trade_in_clean', '$.base', '$.mileage_trade_in_clean', '$.mileage', '$.add_deduct_trade_in_clean', '$.add_deduct', '$.regional_trade_in_clean', '$.regional', '$.adjusted_trade_in_clean', '$.adjusted'])},
              {'kind': 'trade_in', 'tier': 'avg', 'g': b.trade_in_avg,
               'parts': json_extract(b.trade_in_avg, ['$.base_trade_in_avg', '$.base', '$.mileage_trade_in_avg', '$.mileage', '$.add_deduct_trade_in_avg', '$.add_deduct', '$.regional_trade_in_avg', '$.regional', '$.adjusted_trade_in_avg', '$.adjusted'])},
              {'kind': 'trade_in', 'tier': 'rough', 'g': b.trade_in_rough,
               'parts': json_extract(b.trade_in_rough, ['$.base_trade_in_rough', '$.base', '$.mileage_trade_in_rough', '$.mileage', '$.add_deduct_trade_in_rough', '$.add_deduct', '$.regional_trade_in_rough', '$.regional', '$.adjusted_trade_in_rough', '$.adjusted'])}],
              lambda x: starts_with(x.g, '{'))
            AS groups,
          json_transform(b.auction_values, '{"low_auction_value": "JSON", "average_auction_value": "JSON",
              "high_auction_value": "JSON", "date_range": "JSON"}') AS auction,
          -- Each list parsed once into its members; not a list: none (the models' default_factory=list).
          coalesce(json_transform(b.mileage_list, '[{"model_year": "JSON", "range_begin": "JSON", "range_end": "JSON",
              "xclean": "JSON", "clean": "JSON", "avg": "JSON", "rough": "JSON", "finadv": "JSON", "mileage_cat": "JSON"}]'),
              []) AS mileage_bands,
          coalesce(json_transform(b.add_deduct_list, '[{"uoc": "JSON", "name": "JSON", "xclean": "JSON", "clean": "JSON",
              "avg": "JSON", "rough": "JSON", "auto": "JSON"}]'), []) AS add_deducts
      FROM (SELECT vin, fetched_at, request, json_transform(body, '{"model_year": "JSON", "make": "JSON", "model": "JSON", "series": "JSON", "style": "JSON", "uvc": "JSON", "publish_date": "JSON", "retail": "JSON", "trade_in": "JSON", "rough_trade_in": "JSON", "average_trade_in": "JSON", "loan_value": "JSON", "msrp": "JSON", "retail_equipped": "JSON", "whole_xclean": "JSON", "whole_clean": "JSON", "whole_avg": "JSON", "whole_rough": "JSON", "retail_xclean": "JSON", "retail_clean": "JSON", "retail_avg": "JSON", "retail_rough": "JSON", "trade_in_clean": "JSON", "trade_in_avg": "JSON", "trade_in_rough": "JSON", "auction_values": "JSON", "mileage_list": "JSON", "add_deduct_list": "JSON"}') AS b
            FROM found));
