-- Every element of the latest history report's five arrays, one row each, with its date, state, text and
-- odometer typed. The spec does not show the elements' fields: the sandbox's names are read first
-- (date, state, event/brand_name/disposition, odometer, odometer_unit), then NMVTIS-style names the vendor
-- documents (VehicleObtainedDate, TitleIssueDate, VehicleOdometerReadingMeasure...). The element stays in
-- `record` (JSON) for any other field.
CREATE OR REPLACE VIEW history_records AS
WITH arrays AS (
    SELECT vin, 'history_information' AS source, history_information AS records, run_id, fetched_at FROM history_reports
    UNION ALL
    SELECT vin, 'current_title_information', current_title_information, run_id, fetched_at FROM history_reports
    UNION ALL
    SELECT vin, 'brands_information', brands_information, run_id, fetched_at FROM history_reports
    UNION ALL
    SELECT vin, 'insurance_information', insurance_information, run_id, fetched_at FROM history_reports
    UNION ALL
    SELECT vin, 'junk_and_salvage_information', junk_and_salvage_information, run_id, fetched_at FROM history_reports
),
-- Unnested in the select list (a lateral unnest WITH ORDINALITY is about 20 times slower here).
unnested AS (
    SELECT vin, source, run_id, fetched_at,
        unnest(list_transform(records, lambda r, i: {record_index: CAST(i - 1 AS INTEGER), record: r}), recursive := true)
    FROM arrays
),
-- One JSON parse per element: every field we read, by path.
elements AS (
    SELECT * EXCLUDE (f),
        coalesce(f[1], f[2], f[3]) AS date_text,
        coalesce(f[4], f[5]) AS state,
        coalesce(f[6], f[7], f[8], f[9]) AS description,
        coalesce(f[10], f[11], f[12]) AS odometer_text,
        lower(trim(coalesce(f[13], f[14]))) AS unit_text
    FROM (SELECT *, json_extract_string(record, [
              '$.date', '$.TitleIssueDate', '$.VehicleObtainedDate',
              '$.state', '$.TitleIssuingAuthorityName',
              '$.event', '$.brand_name', '$.disposition', '$.VehicleDispositionText',
              '$.odometer', '$.odometer_reading', '$.VehicleOdometerReadingMeasure',
              '$.odometer_unit', '$.VehicleOdometerReadingUnitCode']) AS f
          FROM unnested)
)
SELECT
    vin, source, record_index,
    service_date(date_text) AS record_date,
    state,
    description,
    -- "42,000" reads as 42000; a reading that is not a number ("EXEMPT") is NULL, kept in odometer_reported.
    odometer_number(odometer_text) AS odometer,
    odometer_unit_code(unit_text) AS odometer_unit,
    odometer_text AS odometer_reported,
    record, run_id, fetched_at
FROM elements;
