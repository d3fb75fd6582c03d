-- Helpers the views and the lake export share (views are re-created when these files change, these first).
-- Files here run in name order: 00 helpers, 01 typed views over one table, 02+ views that combine them.

-- A day the service sent as text: YYYY-MM-DD, or an ISO 8601 timestamp (its day as written, e.g. the
-- vendor's `2016-12-06T00:00:00.000Z`). Anything else is NULL, never a guess.
CREATE OR REPLACE MACRO iso_day(text) AS
    CASE WHEN regexp_matches(trim(text), '^\d{4}-\d{2}-\d{2}(T.*)?$')
         THEN CAST(try_strptime(left(trim(text), 10), '%Y-%m-%d') AS DATE) END;

-- As iso_day, and also MM/DD/YYYY: the US order the vendor documents for lien/theft and title records.
CREATE OR REPLACE MACRO service_date(text) AS
    coalesce(iso_day(text),
             CASE WHEN regexp_matches(trim(text), '^\d{1,2}/\d{1,2}/\d{4}$')
                  THEN CAST(try_strptime(trim(text), '%m/%d/%Y') AS DATE) END);

-- The lake's file for a VIN: one of 16 buckets, from the VIN's md5 (stable across DuckDB versions).
CREATE OR REPLACE MACRO vin_bucket(vin) AS
    coalesce(CAST(('0x' || left(md5(vin), 2)) AS INTEGER) % 16, 0);

-- The make the fleet file gives (a `make` column, else `make_hint`; in vehicles.extra), NULL when none.
CREATE OR REPLACE MACRO fleet_file_make(extra) AS
    coalesce(nullif(trim(extra->>'make'), ''), nullif(trim(extra->>'make_hint'), ''));

-- A distance from one unit (`mi`/`km`) to another, rounded to a whole number; NULL when a unit is unknown.
CREATE OR REPLACE MACRO convert_distance(value, from_unit, to_unit) AS
    CASE WHEN from_unit = to_unit THEN value
         WHEN from_unit = 'km' AND to_unit = 'mi' THEN CAST(round(value / 1.609344) AS BIGINT)
         WHEN from_unit = 'mi' AND to_unit = 'km' THEN CAST(round(value * 1.609344) AS BIGINT) END;

-- History elements' odometers (history_records, vehicle_mileage): the text as a whole number ("42,000" is
-- 42000; "EXEMPT" is NULL), and the unit as `mi`/`km` (NULL when not given or not one we know: never assumed).
CREATE OR REPLACE MACRO odometer_number(text) AS
    CAST(round(try_cast(regexp_replace(trim(text), '[,\s]', '', 'g') AS DOUBLE)) AS BIGINT);
CREATE OR REPLACE MACRO odometer_unit_code(text) AS
    CASE WHEN lower(trim(text)) IN ('mi', 'mile', 'miles', 'smi') THEN 'mi'
         WHEN lower(trim(text)) IN ('km', 'kms', 'kilometer', 'kilometers', 'kilometre', 'kilometres', 'kmt') THEN 'km' END;

-- The latest dated reading with a number and a known unit among one history array's elements (JSON[]), as
-- history_records reads them (the same fields, first present): {reading_date, record_index, odometer, unit}, the
-- latest date, then the last in the report's order; NULL when none. Per row, so a query for a few VINs reads
-- only their reports.
CREATE OR REPLACE MACRO latest_reading(records) AS
    list_max(list_filter(list_transform(
        list_transform(records, lambda r, i: {i: CAST(i - 1 AS INTEGER), f: json_extract_string(r, [
            '$.date', '$.TitleIssueDate', '$.VehicleObtainedDate',
            '$.odometer', '$.odometer_reading', '$.VehicleOdometerReadingMeasure',
            '$.odometer_unit', '$.VehicleOdometerReadingUnitCode'])}),
        lambda e: {reading_date: service_date(coalesce(e.f[1], e.f[2], e.f[3])), record_index: e.i,
                   odometer: odometer_number(coalesce(e.f[4], e.f[5], e.f[6])),
                   unit: odometer_unit_code(coalesce(e.f[7], e.f[8]))}),
        lambda x: x.reading_date IS NOT NULL AND x.odometer IS NOT NULL AND x.unit IS NOT NULL));

-- Whether a recall's remedy is available, read from the campaign's `remedy` text (the service sends no flag):
-- false when it says the remedy is not available yet (under development, interim notices), true when it
-- describes one, NULL when the service gave no remedy text.
CREATE OR REPLACE MACRO remedy_available(remedy) AS
    CASE WHEN nullif(trim(remedy), '') IS NULL THEN NULL
         WHEN regexp_matches(lower(remedy), 'not (yet )?(been )?(available|developed|finali[sz]ed|determined)|under development'
                                            || '|no remedy|remedy (is )?(currently )?(being developed|pending|unavailable)'
                                            || '|interim (notice|notification|letter)|when (the )?(a )?remedy (becomes|is) available')
             THEN false
         ELSE true END;
