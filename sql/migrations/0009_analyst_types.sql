-- Types an analyst expects (issue 21): money as DECIMAL(12,2) dollars (sums and comparisons exact to the
-- cent, no 0.1 + 0.2 surprises), and the valuation guide's edition date as a DATE. A publish_date that is not
-- a date (YYYY-MM-DD, or an ISO timestamp whose day is taken) becomes NULL; the text stays in raw_responses.

-- In two steps, the text first: an ALTER ... USING <functions> is replayed from the write-ahead log by binding
-- its functions again, before DuckDB loads them (a crash before the checkpoint left a file that would not
-- open offline); an UPDATE is logged as its values, a plain cast needs no function.
UPDATE market_values SET publish_date =
    CASE WHEN regexp_matches(trim(publish_date), '^\d{4}-\d{2}-\d{2}(T.*)?$')
         THEN CAST(CAST(try_strptime(left(trim(publish_date), 10), '%Y-%m-%d') AS DATE) AS VARCHAR) END;
ALTER TABLE market_values ALTER publish_date TYPE DATE;

ALTER TABLE market_values ALTER retail TYPE DECIMAL(12,2);
ALTER TABLE market_values ALTER trade_in TYPE DECIMAL(12,2);
ALTER TABLE market_values ALTER rough_trade_in TYPE DECIMAL(12,2);
ALTER TABLE market_values ALTER average_trade_in TYPE DECIMAL(12,2);
ALTER TABLE market_values ALTER loan_value TYPE DECIMAL(12,2);
ALTER TABLE market_values ALTER msrp TYPE DECIMAL(12,2);
ALTER TABLE market_values ALTER retail_equipped TYPE DECIMAL(12,2);
ALTER TABLE market_values ALTER valuation_groups TYPE
    STRUCT(kind VARCHAR, tier VARCHAR, base DECIMAL(12,2), mileage DECIMAL(12,2), add_deduct DECIMAL(12,2),
           regional DECIMAL(12,2), adjusted DECIMAL(12,2))[];
ALTER TABLE market_values ALTER auction_values TYPE
    STRUCT(low_auction_value DECIMAL(12,2), average_auction_value DECIMAL(12,2), high_auction_value DECIMAL(12,2),
           date_range VARCHAR);
ALTER TABLE market_values ALTER mileage_list TYPE
    STRUCT(model_year VARCHAR, range_begin INTEGER, range_end INTEGER, xclean DECIMAL(12,2), clean DECIMAL(12,2),
           avg DECIMAL(12,2), rough DECIMAL(12,2), finadv DECIMAL(12,2), mileage_cat VARCHAR)[];
ALTER TABLE market_values ALTER add_deduct_list TYPE
    STRUCT(uoc VARCHAR, name VARCHAR, xclean DECIMAL(12,2), clean DECIMAL(12,2), avg DECIMAL(12,2),
           rough DECIMAL(12,2), auto VARCHAR)[];

ALTER TABLE trade_in_history ALTER trade_in TYPE DECIMAL(12,2);
