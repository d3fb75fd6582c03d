-- Every campaign still open on a fleet vehicle, with the vehicle it concerns.
-- matched_by: 'vin' = the service listed this campaign for this VIN (confirmed);
--             'model' = listed for the vehicle's year/make/model only (`--recall-details model`): likely.
-- A VIN-level answer outranks a model list: a confirmed campaign stays `vin` until an answer for the VIN closes it.
CREATE OR REPLACE VIEW open_recalls AS
SELECT
    r.vin, v.unit_number, v.plate, v.fleet, s.year, s.make, s.model,
    r.nhtsa_campaign_number, r.matched_by, r.manufacturer, r.component, r.summary, r.consequence, r.remedy,
    -- Whether a fix exists yet (read from the remedy's text: remedy_available in 00_macros.sql), and the notes.
    remedy_available(r.remedy) AS remedy_available, r.notes,
    r.park_it, r.park_outside, r.over_the_air_update, r.report_received_date,
    r.first_seen_at, r.last_seen_at,
    -- Open since the campaign's own date (NHTSA received the report), not since we first saw it: a campaign
    -- of 2014 found by our first run is years open, not 0 days. NULL when the service gave no date.
    date_diff('day', r.report_received_date, current_date) AS days_open,
    date_diff('day', r.first_seen_at, now()) AS days_since_first_seen
FROM recalls AS r
LEFT JOIN vehicles AS v USING (vin)
LEFT JOIN specs AS s USING (vin)
WHERE r.closed_at IS NULL;
