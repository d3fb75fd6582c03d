-- Vehicles whose fleet-file mileage is below the latest odometer reading of their history report: the file
-- is out of date or wrong. Both figures in the file's unit, the gap, and what the vehicle's latest valuation was
-- really asked with (its recorded request: market_values.mileage, mileage_source), so that every text about
-- it, the to-do list's included, says what was used (valuations ask with the reading: see vehicle_mileage).
-- For the to-do list: `reason` says it in one line.
CREATE OR REPLACE VIEW mileage_conflicts AS
SELECT
    m.vin, v.unit_number, v.plate, v.fleet,
    m.file_mileage,
    m.valuation_mileage AS latest_odometer,
    coalesce(m.file_mileage_unit, 'mi') AS mileage_unit,
    m.odometer_date,
    m.valuation_mileage - m.file_mileage AS gap,
    m.latest_odometer AS odometer_reported, m.odometer_unit AS odometer_reported_unit,
    mv.valued_on, mv.mileage AS valued_mileage, mv.mileage_unit AS valued_mileage_unit,
    mv.mileage_source AS valued_mileage_source,
    format('fleet file says {:,} {}, history read {:,} {} on {}: {:,} {} more; {}',
           m.file_mileage, coalesce(m.file_mileage_unit, 'mi'), m.latest_odometer, m.odometer_unit,
           strftime(m.odometer_date, '%Y-%m-%d'), m.valuation_mileage - m.file_mileage,
           coalesce(m.file_mileage_unit, 'mi'),
           CASE WHEN mv.vin IS NULL THEN 'not valued yet (valuations ask with the reading)'
                WHEN mv.mileage IS NULL THEN format('the latest valuation ({}) was asked without a mileage', mv.valued_on)
                ELSE format('the latest valuation ({}) was asked with {:,} {}{}', mv.valued_on, mv.mileage,
                            mv.mileage_unit, CASE mv.mileage_source WHEN 'history' THEN ', the reading'
                                                                    WHEN 'fleet_file' THEN ', the file''s'
                                                                    ELSE '' END) END) AS reason
FROM vehicle_mileage AS m
JOIN vehicles AS v USING (vin)
LEFT JOIN latest_market_values AS mv USING (vin)
WHERE m.file_mileage IS NOT NULL AND m.valuation_mileage_source = 'history';
