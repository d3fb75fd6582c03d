-- Every campaign still open on a fleet vehicle, with the vehicle it concerns.
-- matched_by: 'vin' = the service listed this campaign for this VIN (confirmed);
--             'model' = listed for the vehicle's year/make/model only (`--recall-details model`): likely.
CREATE OR REPLACE VIEW open_recalls AS
SELECT
    r.vin, v.unit_number, v.plate, v.fleet, s.year, s.make, s.model,
    r.nhtsa_campaign_number, r.matched_by, r.manufacturer, r.component, r.summary, r.consequence, r.remedy,
    r.park_it, r.park_outside, r.over_the_air_update, r.report_received_date,
    r.first_seen_at, r.last_seen_at,
    date_diff('day', r.first_seen_at, now()) AS days_open
FROM recalls AS r
LEFT JOIN vehicles AS v USING (vin)
LEFT JOIN specs AS s USING (vin)
WHERE r.closed_at IS NULL;
