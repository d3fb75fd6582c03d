-- Roster vehicles whose fleet-file mileage is below their latest history odometer reading: the file is out
-- of date (or wrong), and valuations are asked with the file's mileage. Both are compared in miles (a file
-- without a unit is in miles, the US default). The latest reading is the one of the latest date; on a date
-- with several, the last recorded (record_index), then the highest. When the `mileage_conflicts` view
-- (issue 21) is in the database, this query becomes a SELECT from it with the same columns.
WITH latest AS (
    SELECT vin, reading_date, odometer, unit
    FROM odometer_readings
    WHERE odometer IS NOT NULL AND unit IS NOT NULL AND reading_date IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY vin ORDER BY reading_date DESC, record_index DESC, odometer DESC) = 1
), compared AS (
    SELECT o.vin, o.unit_number, o.plate, o.fleet, o.year, o.make, o.model,
           o.mileage AS fleet_mileage, coalesce(o.mileage_unit, 'mi') AS fleet_mileage_unit,
           l.odometer AS history_odometer, l.unit AS history_unit, l.reading_date AS history_date,
           o.mileage * CASE WHEN o.mileage_unit = 'km' THEN 0.621371 ELSE 1 END AS fleet_miles,
           l.odometer * CASE WHEN l.unit = 'km' THEN 0.621371 ELSE 1 END AS history_miles
    FROM vehicle_overview AS o
    JOIN latest AS l USING (vin)
    WHERE o.mileage IS NOT NULL
)
SELECT vin, unit_number, plate, fleet, year, make, model, fleet_mileage, fleet_mileage_unit,
       history_odometer, history_unit, history_date,
       CAST(round(history_miles - fleet_miles) AS BIGINT) AS miles_below
FROM compared
WHERE fleet_miles < history_miles
ORDER BY miles_below DESC, unit_number, vin;
