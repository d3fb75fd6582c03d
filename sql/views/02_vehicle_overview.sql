-- One row per roster vehicle: latest specs, latest value, open recalls, title brands, lien/theft events.
CREATE OR REPLACE VIEW vehicle_overview AS
WITH latest_check AS (
    SELECT *
    FROM recall_checks
    QUALIFY row_number() OVER (PARTITION BY vin ORDER BY fetched_at DESC, campaigns_listed DESC) = 1
),
open_campaigns AS (
    SELECT vin, count(*) FILTER (WHERE matched_by = 'vin') AS confirmed, count(*) FILTER (WHERE matched_by = 'model') AS likely
    FROM recalls WHERE closed_at IS NULL GROUP BY vin
),
lien_theft AS (
    SELECT vin, count(*) AS lien_theft_events, list(DISTINCT event ORDER BY event) AS lien_theft_event_types
    FROM lien_theft_events GROUP BY vin
)
SELECT
    v.vin, v.unit_number, v.plate, v.state, v.mileage, v.mileage_unit, v.condition, v.fleet, v.check_digit_valid,
    coalesce(s.year, mv.model_year) AS year,
    coalesce(s.make, mv.make) AS make,
    coalesce(s.model, mv.model) AS model,
    s.trim, s.style, s.type, s.fuel_type, s.engine, s.drivetrain, s.transmission, s.made_in, s.is_international,
    s.fetched_at AS specs_fetched_at,
    mv.retail, mv.trade_in, mv.loan_value, mv.msrp, mv.condition AS valued_condition, mv.valued_on,
    -- Confirmed for this VIN: the campaigns its own lookup listed, else the count its batch check gave
    -- (also when the campaigns came from the model's list: the count is the VIN's, the names are not).
    CASE WHEN lc.campaigns_listed AND lc.checked_via <> 'model' THEN coalesce(oc.confirmed, 0) ELSE lc.recall_count END
        AS open_recall_count,
    -- Open campaigns only matched through the model's list (`--recall-details model`): likely, not confirmed.
    CASE WHEN lc.vin IS NOT NULL THEN coalesce(oc.likely, 0) END AS likely_recall_count,
    lc.fetched_at AS recalls_checked_at,
    h.title_brands, h.brands_record_count, h.vin_changed, h.fetched_at AS history_fetched_at,
    coalesce(lt.lien_theft_events, 0) AS lien_theft_events, lt.lien_theft_event_types
FROM vehicles AS v
LEFT JOIN specs AS s USING (vin)
LEFT JOIN latest_market_values AS mv USING (vin)
LEFT JOIN latest_check AS lc USING (vin)
LEFT JOIN open_campaigns AS oc USING (vin)
LEFT JOIN history_reports AS h USING (vin)
LEFT JOIN lien_theft AS lt USING (vin);
