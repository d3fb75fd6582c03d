-- Roster vehicles whose fleet-file mileage is below their latest history odometer reading (view
-- mileage_conflicts): the file is out of date or wrong; `reason` is the view's, saying what the latest valuation
-- was asked with. `miles_below`: the gap in miles, whatever the file's unit.
SELECT c.vin, c.unit_number, c.plate, c.fleet, o.year, o.make, o.model,
       c.file_mileage AS fleet_mileage, c.mileage_unit AS fleet_mileage_unit,
       c.odometer_reported AS history_odometer, c.odometer_reported_unit AS history_unit,
       c.odometer_date AS history_date, c.reason, c.valued_mileage, c.valued_mileage_unit, c.valued_mileage_source,
       CAST(round(c.gap * CASE WHEN c.mileage_unit = 'km' THEN 0.621371 ELSE 1 END) AS BIGINT) AS miles_below
FROM mileage_conflicts AS c
LEFT JOIN vehicle_overview AS o USING (vin)
ORDER BY miles_below DESC, c.unit_number, c.vin;
