-- The mileage valuations ask with now (vehicle_mileage) and where it comes from, for the VINs of one chunk ($vins)
-- as it starts: the history landed earlier in the run counts (tasks/plan/due.py `due_rows`). Through the view's
-- table macro, so only these VINs' reports are read, whatever the roster's size.
SELECT vin, valuation_mileage AS mileage, valuation_mileage_unit AS mileage_unit,
       valuation_mileage_source AS mileage_source
FROM vehicle_mileage_of($vins::VARCHAR[]);
