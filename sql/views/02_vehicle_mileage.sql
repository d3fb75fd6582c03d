-- Which mileage a vehicle is valued with (sql/README.md, "Mileage: the file's or the history's"): the fleet
-- file's, unless the latest odometer reading of its history report is higher. Odometers do not run back, so a
-- file mileage below a dated reading is out of date (or a typo): the reading is the better figure, and the
-- larger one is what the valuation asks with. No file mileage: the reading's. One row per roster vehicle.
-- Readings without a date, a number or a known unit are not compared (a unit is never assumed).
-- As a table macro of the VINs wanted (NULL: every roster vehicle), the view below being all of them: a filter on
-- the view's VIN does not reach the history reports through its LEFT JOIN, so every report was parsed (seconds on
-- a large roster); a chunk of valuations reads its own VINs' this way (`valuation_mileage_of_vins`).
CREATE OR REPLACE MACRO vehicle_mileage_of(vins) AS TABLE
WITH latest AS (
    -- The latest dated reading of the five arrays (a day's readings in the report's order, the last: the
    -- readings odometer_readings lists, read per report by `latest_reading`).
    SELECT vin, greatest(latest_reading(history_information), latest_reading(current_title_information),
                         latest_reading(brands_information), latest_reading(insurance_information),
                         latest_reading(junk_and_salvage_information)) AS reading
    FROM history_reports
    WHERE vins IS NULL OR vin IN (SELECT unnest(vins))
),
compared AS (
    SELECT v.vin, v.mileage AS file_mileage, v.mileage_unit AS file_mileage_unit,
        l.reading.odometer AS latest_odometer, l.reading.unit AS odometer_unit, l.reading.reading_date AS odometer_date,
        -- The reading in the file's unit (miles when the file gave a mileage without one).
        convert_distance(l.reading.odometer, l.reading.unit, coalesce(v.mileage_unit, 'mi')) AS odometer_in_file_unit
    FROM (SELECT * FROM vehicles WHERE vins IS NULL OR vin IN (SELECT unnest(vins))) AS v
    LEFT JOIN latest AS l USING (vin)
)
SELECT vin, file_mileage, file_mileage_unit, latest_odometer, odometer_unit, odometer_date,
    CASE WHEN file_mileage IS NULL THEN latest_odometer
         WHEN odometer_in_file_unit > file_mileage THEN odometer_in_file_unit
         ELSE file_mileage END AS valuation_mileage,
    CASE WHEN file_mileage IS NULL THEN odometer_unit
         WHEN odometer_in_file_unit > file_mileage THEN coalesce(file_mileage_unit, 'mi')
         ELSE file_mileage_unit END AS valuation_mileage_unit,
    CASE WHEN file_mileage IS NULL AND latest_odometer IS NOT NULL THEN 'history'
         WHEN odometer_in_file_unit > file_mileage THEN 'history'
         WHEN file_mileage IS NOT NULL THEN 'fleet_file' END AS valuation_mileage_source
FROM compared;

CREATE OR REPLACE VIEW vehicle_mileage AS SELECT * FROM vehicle_mileage_of(NULL::VARCHAR[]);
