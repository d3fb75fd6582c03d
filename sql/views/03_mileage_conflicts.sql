-- Vehicles whose fleet-file mileage is below the latest odometer reading of their history report: the file
-- is out of date or wrong. Both figures in the file's unit, the gap; valuations use the reading (see
-- vehicle_mileage). For the to-do list: `reason` says it in one line.
CREATE OR REPLACE VIEW mileage_conflicts AS
SELECT
    m.vin, v.unit_number, v.plate, v.fleet,
    m.file_mileage,
    m.valuation_mileage AS latest_odometer,
    coalesce(m.file_mileage_unit, 'mi') AS mileage_unit,
    m.odometer_date,
    m.valuation_mileage - m.file_mileage AS gap,
    m.latest_odometer AS odometer_reported, m.odometer_unit AS odometer_reported_unit,
    format('fleet file says {:,} {}, history read {:,} {} on {}: {:,} {} more',
           m.file_mileage, coalesce(m.file_mileage_unit, 'mi'), m.latest_odometer, m.odometer_unit,
           strftime(m.odometer_date, '%Y-%m-%d'), m.valuation_mileage - m.file_mileage,
           coalesce(m.file_mileage_unit, 'mi')) AS reason
FROM vehicle_mileage AS m
JOIN vehicles AS v USING (vin)
WHERE m.file_mileage IS NOT NULL AND m.valuation_mileage_source = 'history';
