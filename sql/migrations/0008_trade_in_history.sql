-- The value history the service sends with every valuation (issue 21): `/v2/marketvalue` answers carry the
-- trade-in values of the months before it (`trade_in_values`, six in the sandbox), so the fleet's value
-- trend starts with the first run. One row per VIN and month: the newest answer's figure.
-- Stored answers fill it with `fleet backfill --reparse --datasets market_value`.

CREATE TABLE trade_in_history (
    vin           VARCHAR NOT NULL,
    month         DATE NOT NULL,          -- the first day of the month the value is for
    trade_in      DOUBLE,                 -- that month's trade-in value, the measure of market_values.trade_in
    valued_on     DATE,                   -- the day of the valuation whose answer listed it
    state         VARCHAR,                -- what that valuation asked (as market_values' key)
    mileage       BIGINT,
    mileage_unit  VARCHAR,
    condition     VARCHAR,
    run_id        VARCHAR NOT NULL,
    fetched_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (vin, month)
);
