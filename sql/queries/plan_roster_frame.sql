-- `plan_roster`, for a roster not landed yet: the frame the planner registered as `plan_roster_frame`
-- (tasks/plan.py; a dry run plans from the fleet as read, without landing it).
SELECT r.vin, r.state, r.mileage, r.mileage_unit, r.condition, r.country, s.is_international AS specs_international
FROM plan_roster_frame AS r
LEFT JOIN specs AS s ON s.vin = r.vin
ORDER BY r.vin;
