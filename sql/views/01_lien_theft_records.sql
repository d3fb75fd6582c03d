-- The lien/theft events of each VIN's latest report with typed columns read from their text.
-- The service sends each event as {event, location, details_list}; details are "Label: value" strings
-- (the sandbox: "Date: 2022-01-02", "Lienholder: ...", "Agency: ..."; the vendor documents MM/DD/YYYY
-- dates and an "Open Lien" text "... open lien on title: <lienholder>"). What cannot be read is NULL.
CREATE OR REPLACE VIEW lien_theft_records AS
WITH labelled AS (
    -- Each detail split once at its first colon: label (lower case, no spaces) and value.
    SELECT e.*, lower(e.event) AS event_lower,
        list_transform(e.details_list, lambda d: {
            label: replace(lower(split_part(d, ':', 1)), ' ', ''),
            value: CASE WHEN contains(d, ':') THEN nullif(trim(substr(d, strpos(d, ':') + 1)), '') END}) AS details
    FROM lien_theft_events AS e
),
parsed AS (
    SELECT * EXCLUDE (event_lower, details),
        CASE
            WHEN contains(event_lower, 'lien') AND (contains(event_lower, 'releas') OR contains(event_lower, 'satisf'))
                THEN 'lien_release'
            WHEN contains(event_lower, 'lien') THEN 'lien'
            WHEN contains(event_lower, 'recover') THEN 'theft_recovery'
            WHEN contains(event_lower, 'theft') OR contains(event_lower, 'stolen') THEN 'theft'
            ELSE 'other'
        END AS event_kind,
        service_date(list_filter(details, lambda d: d.label = 'date')[1].value) AS event_date,
        coalesce(list_filter(details, lambda d: d.label = 'lienholder')[1].value,
                 list_filter(details, lambda d: suffix(d.label, 'openlienontitle'))[1].value) AS lienholder,
        list_filter(details, lambda d: d.label = 'agency')[1].value AS agency
    FROM labelled
),
-- A lien is released by a release of the same lienholder dated on or after it; a theft is recovered by a
-- recovery dated on or after it. When a release or recovery could be its own but a date or a name is
-- missing, we cannot tell: NULL.
verdicts AS (
    SELECT p.vin, p.event_index,
        bool_or(r.event_kind = 'lien_release' AND lower(r.lienholder) = lower(p.lienholder)
                AND r.event_date >= p.event_date) AS released,
        bool_or(r.event_kind = 'lien_release'
                AND (r.lienholder IS NULL OR p.lienholder IS NULL OR lower(r.lienholder) = lower(p.lienholder))
                AND NOT coalesce(r.event_date < p.event_date, false)) AS maybe_released,
        bool_or(r.event_kind = 'theft_recovery' AND r.event_date >= p.event_date) AS recovered,
        bool_or(r.event_kind = 'theft_recovery' AND NOT coalesce(r.event_date < p.event_date, false)) AS maybe_recovered
    FROM parsed AS p
    JOIN parsed AS r ON r.vin = p.vin AND r.event_kind IN ('lien_release', 'theft_recovery')
    WHERE p.event_kind IN ('lien', 'theft')
    GROUP BY p.vin, p.event_index
)
SELECT
    p.vin, p.event_index, p.event, p.event_kind, p.location, p.event_date, p.lienholder, p.agency,
    -- A release itself is not an active lien.
    CASE p.event_kind
        WHEN 'lien_release' THEN false
        WHEN 'lien' THEN CASE WHEN v.released THEN false WHEN v.maybe_released THEN NULL ELSE true END
    END AS active,
    -- A recovery, "Recovered Theft" included, is a theft no longer outstanding.
    CASE p.event_kind
        WHEN 'theft_recovery' THEN false
        WHEN 'theft' THEN CASE WHEN v.recovered THEN false WHEN v.maybe_recovered THEN NULL ELSE true END
    END AS stolen_not_recovered,
    p.details_list, p.year, p.make, p.model, p.type, p.run_id, p.fetched_at
FROM parsed AS p
LEFT JOIN verdicts AS v USING (vin, event_index);
