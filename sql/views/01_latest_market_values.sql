-- The newest valuation of each VIN (any state, mileage or condition; newest in the order answers arrived: run_seq,
-- whatever the run's clock said, then the day and time), with the service's text dates typed:
-- `auction_from`/`auction_to` from auction_values.date_range ("YYYY-MM-DD to YYYY-MM-DD"); NULL when the text
-- is not such a date. `published_on` is publish_date (a DATE since migration 0008), kept for older queries.
CREATE OR REPLACE VIEW latest_market_values AS
SELECT *,
    publish_date AS published_on,
    iso_day(regexp_extract(auction_values.date_range, '^\s*(\S+)\s+to\s+\S+\s*$', 1)) AS auction_from,
    iso_day(regexp_extract(auction_values.date_range, '^\s*\S+\s+to\s+(\S+)\s*$', 1)) AS auction_to
FROM market_values
QUALIFY row_number() OVER (PARTITION BY vin ORDER BY run_seq DESC, valued_on DESC, fetched_at DESC) = 1;
