-- What changed since each vehicle's previous answer (issue 14). Recorded as each answer lands, by comparing
-- it with what was held before the newest answer replaced it (sql/changes/): a VIN's first answer is no
-- change, and landing the same answer again (a journal replayed after a crash) records nothing twice.

CREATE TABLE changes (
    run_id       VARCHAR NOT NULL,             -- the run whose answer showed the change
    vin          VARCHAR NOT NULL,
    dataset      VARCHAR NOT NULL,             -- specs | market_value | recalls | history | lien_theft
    kind         VARCHAR NOT NULL,             -- new_recall | closed_recall | value_move | new_title_brand | ...
    subject      VARCHAR NOT NULL,             -- what it concerns: campaign, brand, event, reading date; '' = the vehicle
    severity     VARCHAR NOT NULL,             -- park_now | park_outside | high | info
    before       JSON,                         -- what was held (NULL for something new)
    after        JSON,                         -- what the newer answer says (NULL for something gone)
    fetched_at   TIMESTAMPTZ NOT NULL,         -- when the service gave the answer that shows it
    detected_at  TIMESTAMPTZ NOT NULL,         -- when it was recorded
    PRIMARY KEY (run_id, vin, dataset, kind, subject)
);
