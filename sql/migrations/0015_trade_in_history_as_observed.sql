-- Value history as observed (issue 26): every answer's `trade_in_values` months are kept with when they were
-- observed (the answer's fetched_at), appended, never overwritten by a later answer. A later answer restates the
-- months before it on its own scale (a 30% drop rescales the whole past): keeping each observation lets the
-- views read a month's value as first observed (views trade_in_by_month, vehicle_value_change).
-- With where the valuation's mileage came from, as market_values. DuckDB cannot change a primary key: the table
-- is made again, rows kept (each held the newest answer's figure: one observation per VIN and month).
CREATE TABLE trade_in_history_observed (
    vin             VARCHAR NOT NULL,
    month           DATE NOT NULL,          -- the first day of the month the value is for
    trade_in        DECIMAL(12,2),          -- that month's trade-in value as this answer gave it
    valued_on       DATE,                   -- the day of the valuation whose answer listed it
    state           VARCHAR,                -- what that valuation asked (as market_values)
    mileage         BIGINT,
    mileage_unit    VARCHAR,
    condition       VARCHAR,
    mileage_source  VARCHAR,
    run_id          VARCHAR NOT NULL,
    fetched_at      TIMESTAMPTZ NOT NULL,   -- when the service answered: when this figure was observed
    service         VARCHAR,                -- the service that answered (0012)
    run_seq         BIGINT,                 -- the place of run_id in the order runs arrived (0013)
    PRIMARY KEY (vin, month, fetched_at)
);

INSERT INTO trade_in_history_observed BY NAME SELECT * FROM trade_in_history;

DROP TABLE trade_in_history;

ALTER TABLE trade_in_history_observed RENAME TO trade_in_history;
