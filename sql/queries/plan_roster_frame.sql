-- For a roster not landed yet (registered by tasks/plan/due.py as `plan_roster_frame`, its VINs only): what
-- /specs said of where each VIN was decoded, for the VINs it answered. The planner joins it to the
-- roster itself (a dry run plans from the fleet as read, without landing it).
SELECT s.vin, s.is_international AS specs_international
FROM specs AS s
WHERE s.vin IN (SELECT vin FROM plan_roster_frame);
