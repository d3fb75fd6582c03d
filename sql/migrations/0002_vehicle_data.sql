-- What the Vehicle Data Service tells us about each VIN. Nested parts stay nested (structs/lists).

CREATE TABLE specs (
    vin               VARCHAR PRIMARY KEY,     -- latest decode per VIN
    year              INTEGER,
    make              VARCHAR,
    model             VARCHAR,
    trim              VARCHAR,
    style             VARCHAR,
    type              VARCHAR,
    made_in           VARCHAR,
    doors             INTEGER,
    fuel_type         VARCHAR,
    engine            VARCHAR,
    engine_cylinders  INTEGER,
    transmission      VARCHAR,
    drivetrain        VARCHAR,
    colors            STRUCT(category VARCHAR, name VARCHAR)[],
    equipment         STRUCT(name VARCHAR, value VARCHAR)[],
    warranties        STRUCT(type VARCHAR, miles INTEGER, months INTEGER)[],
    is_international  BOOLEAN,
    run_id            VARCHAR NOT NULL,
    fetched_at        TIMESTAMPTZ NOT NULL
);

CREATE TABLE market_values (
    vin               VARCHAR NOT NULL,
    valued_on         DATE NOT NULL,           -- one valuation per VIN, day and request (state, mileage, condition)
    state             VARCHAR,
    mileage           BIGINT,
    condition         VARCHAR,
    model_year        INTEGER,
    make              VARCHAR,
    model             VARCHAR,
    series            VARCHAR,
    style             VARCHAR,
    uvc               VARCHAR,
    publish_date      VARCHAR,
    retail            DOUBLE,
    trade_in          DOUBLE,
    rough_trade_in    DOUBLE,
    average_trade_in  DOUBLE,
    loan_value        DOUBLE,
    msrp              DOUBLE,
    retail_equipped   DOUBLE,
    valuation_groups  STRUCT(kind VARCHAR, tier VARCHAR, base DOUBLE, mileage DOUBLE, add_deduct DOUBLE,
                             regional DOUBLE, adjusted DOUBLE)[],
    auction_values    STRUCT(low_auction_value DOUBLE, average_auction_value DOUBLE,
                             high_auction_value DOUBLE, date_range VARCHAR),
    mileage_list      STRUCT(model_year VARCHAR, range_begin INTEGER, range_end INTEGER, xclean DOUBLE,
                             clean DOUBLE, avg DOUBLE, rough DOUBLE, finadv DOUBLE, mileage_cat VARCHAR)[],
    add_deduct_list   STRUCT(uoc VARCHAR, name VARCHAR, xclean DOUBLE, clean DOUBLE, avg DOUBLE,
                             rough DOUBLE, auto VARCHAR)[],
    run_id            VARCHAR NOT NULL,
    fetched_at        TIMESTAMPTZ NOT NULL
);

CREATE TABLE recall_checks (
    vin               VARCHAR NOT NULL,
    run_id            VARCHAR NOT NULL,
    checked_via       VARCHAR NOT NULL,        -- batch (recalls-batch results) | vin (/v1/recalls lookup)
    batch_id          VARCHAR,
    has_recalls       BOOLEAN,
    recall_count      INTEGER,
    campaigns_listed  BOOLEAN NOT NULL DEFAULT false,  -- true when this check listed every open campaign
    fetched_at        TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (vin, run_id, checked_via)
);

CREATE TABLE recalls (
    vin                    VARCHAR NOT NULL,
    nhtsa_campaign_number  VARCHAR NOT NULL,
    manufacturer           VARCHAR,
    park_it                BOOLEAN,
    park_outside           BOOLEAN,
    over_the_air_update    BOOLEAN,
    report_received_date   DATE,
    component              VARCHAR,
    summary                VARCHAR,
    consequence            VARCHAR,
    remedy                 VARCHAR,
    notes                  VARCHAR,
    first_seen_at          TIMESTAMPTZ,
    first_seen_run_id      VARCHAR,
    last_seen_at           TIMESTAMPTZ,
    closed_at              TIMESTAMPTZ,        -- first complete check that no longer listed it
    run_id                 VARCHAR NOT NULL,   -- latest run that saw it
    fetched_at             TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (vin, nhtsa_campaign_number)
);

CREATE TABLE history_reports (
    vin                           VARCHAR PRIMARY KEY,  -- latest report per VIN
    brands_record_count           INTEGER,
    vin_changed                   BOOLEAN,
    title_brands                  VARCHAR[],
    junk_and_salvage_information  JSON[],
    insurance_information         JSON[],
    brands_information            JSON[],
    current_title_information     JSON[],
    history_information           JSON[],
    run_id                        VARCHAR NOT NULL,
    fetched_at                    TIMESTAMPTZ NOT NULL
);

CREATE TABLE lien_theft_events (
    vin           VARCHAR NOT NULL,
    event_index   INTEGER NOT NULL,            -- position in the latest report's events array
    event         VARCHAR,
    location      VARCHAR,
    details_list  VARCHAR[],
    year          INTEGER,
    make          VARCHAR,
    model         VARCHAR,
    type          VARCHAR,
    run_id        VARCHAR NOT NULL,
    fetched_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (vin, event_index)
);

CREATE TABLE raw_responses (
    response_hash   VARCHAR PRIMARY KEY,       -- sha256 of dataset, vin, batch and redacted body
    dataset         VARCHAR NOT NULL,
    vin             VARCHAR,
    batch_id        VARCHAR,
    endpoint        VARCHAR,
    request_params  JSON,                      -- never holds the API key
    status          INTEGER,
    body            JSON,                      -- redacted: input.key removed
    run_id          VARCHAR NOT NULL,
    fetched_at      TIMESTAMPTZ NOT NULL
);
