-- The mileage valuations ask with (the view vehicle_mileage: the file's, or a higher history reading) and where it
-- comes from, for the VINs the planner registered as `plan_mileage_vins` (those due for a valuation): only their
-- reports are read.
SELECT m.vin, m.valuation_mileage AS mileage, m.valuation_mileage_unit AS mileage_unit,
       m.valuation_mileage_source AS mileage_source
FROM vehicle_mileage AS m
SEMI JOIN plan_mileage_vins AS p ON p.vin = m.vin;
