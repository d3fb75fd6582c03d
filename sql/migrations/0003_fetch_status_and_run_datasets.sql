-- What the planner needs: when each dataset last answered for each VIN (found or a stable "no data"),
-- what each run did per dataset, and the enterprise-only ownership records.

CREATE TABLE fetch_status (
    vin         VARCHAR NOT NULL,
    dataset     VARCHAR NOT NULL,              -- specs | market_value | recalls | history | lien_theft | ownership
    outcome     VARCHAR NOT NULL,              -- found | no_data (a 404 the service keeps giving for this VIN)
    run_id      VARCHAR NOT NULL,
    fetched_at  TIMESTAMPTZ NOT NULL,          -- the latest successful answer: freshness is measured from here
    PRIMARY KEY (vin, dataset)
);

CREATE TABLE run_datasets (
    run_id         VARCHAR NOT NULL,
    dataset        VARCHAR NOT NULL,
    roster         BIGINT,                     -- VINs in scope for this dataset
    skipped_fresh  BIGINT,                     -- still fresh: not called
    planned        BIGINT,                     -- due: to be called this run
    estimated_units BIGINT,
    found          BIGINT,
    no_data        BIGINT,
    failed         BIGINT,
    pending        BIGINT,                     -- not attempted (quota, credits, --max-units): next run takes them
    units          BIGINT,
    calls          BIGINT,
    stop_reason    VARCHAR,
    fetched_at     TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (run_id, dataset)
);

CREATE TABLE ownership_records (
    vin          VARCHAR PRIMARY KEY,          -- latest lookup per VIN
    owner_count  INTEGER,
    vehicle      JSON,
    owners       JSON,                         -- personal data: kept in DuckDB, never exported to the lake
    run_id       VARCHAR NOT NULL,
    fetched_at   TIMESTAMPTZ NOT NULL
);
