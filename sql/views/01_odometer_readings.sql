-- History's odometer readings, typed: one row per reading (an element of the latest history report that
-- carries an odometer). The current title repeats the latest title's reading: a reading reported by
-- several arrays is listed once, from the first of history, current title, brands, insurance, junk/salvage.
CREATE OR REPLACE VIEW odometer_readings AS
SELECT
    vin, record_date AS reading_date, odometer, odometer_unit AS unit, source, record_index, state,
    description AS event, odometer_reported, run_id, fetched_at
FROM history_records
WHERE odometer_reported IS NOT NULL
QUALIFY row_number() OVER (
    PARTITION BY vin, record_date, odometer_reported, odometer_unit
    ORDER BY list_position(['history_information', 'current_title_information', 'brands_information',
                            'insurance_information', 'junk_and_salvage_information'], source), record_index) = 1;
