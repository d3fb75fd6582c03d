-- One row per roster vehicle: latest specs, latest value, open recalls (and whether to park it now), title
-- brands, lien/theft events (and the liens still open, a theft not recovered).
CREATE OR REPLACE VIEW vehicle_overview AS
WITH latest_check AS (
    SELECT *
    FROM recall_checks
    -- The latest in the order answers arrived (run_seq), whatever the run's clock said.
    QUALIFY row_number() OVER (PARTITION BY vin ORDER BY run_seq DESC, fetched_at DESC, campaigns_listed DESC) = 1
),
open_campaigns AS (
    SELECT vin, count(*) FILTER (WHERE matched_by = 'vin') AS confirmed, count(*) FILTER (WHERE matched_by = 'model') AS likely
    FROM recalls WHERE closed_at IS NULL GROUP BY vin
),
lien_theft AS (
    SELECT vin, count(*) AS lien_theft_events, list(DISTINCT event ORDER BY event) AS lien_theft_event_types,
        count(*) FILTER (WHERE active) AS active_liens,
        list(DISTINCT lienholder ORDER BY lienholder) FILTER (WHERE active AND lienholder IS NOT NULL) AS active_lienholders,
        bool_or(stolen_not_recovered) AS stolen,
        count(*) FILTER (WHERE event_kind = 'theft' AND stolen_not_recovered IS NULL) AS thefts_undecided
    FROM lien_theft_records GROUP BY vin
),
lien_theft_answered AS (
    SELECT vin FROM fetch_status WHERE dataset = 'lien_theft'
),
-- Open campaigns that say park it (do not drive) or park outside (away from buildings): confirmed for the
-- VIN, or only through the model's list (likely).
park AS (
    SELECT vin,
        list(nhtsa_campaign_number ORDER BY nhtsa_campaign_number)
            FILTER (WHERE matched_by = 'vin' AND (park_it OR park_outside)) AS confirmed,
        bool_or(park_it OR park_outside) FILTER (WHERE matched_by = 'model') AS likely
    FROM recalls WHERE closed_at IS NULL GROUP BY vin
)
SELECT
    v.vin, v.unit_number, v.plate, v.state, v.mileage, v.mileage_unit, v.condition, v.fleet, v.check_digit_valid,
    coalesce(s.year, mv.model_year) AS year,
    -- The make the service gives (its decode, else the valuation), else the fleet file's: make_source says which.
    coalesce(s.make, mv.make, fleet_file_make(v.extra)) AS make,
    CASE WHEN s.make IS NOT NULL THEN 'specs' WHEN mv.make IS NOT NULL THEN 'valuation'
         WHEN fleet_file_make(v.extra) IS NOT NULL THEN 'fleet_file' END AS make_source,
    coalesce(s.model, mv.model) AS model,
    s.trim, s.style, s.type, s.fuel_type, s.engine, s.drivetrain, s.transmission, s.made_in, s.is_international,
    s.fetched_at AS specs_fetched_at,
    mv.retail, mv.trade_in, mv.loan_value, mv.msrp, mv.condition AS valued_condition, mv.valued_on,
    -- Whether the latest recall check tells a count (sql/README.md, "Unknown is not zero"): `checked`;
    -- `no_data`: the service has no data for the VIN (its own lookup answered 404, or the batch said 0 for a
    -- VIN whose decode the service does not have either: a zero that no record stands behind); `not_checked`.
    CASE WHEN lc.vin IS NULL THEN 'not_checked'
         WHEN lc.checked_via = 'vin' AND lc.recall_count IS NULL THEN 'no_data'
         WHEN lc.checked_via = 'batch' AND coalesce(lc.recall_count, 0) = 0 AND sf.outcome = 'no_data' THEN 'no_data'
         ELSE 'checked' END AS recall_status,
    -- Confirmed for this VIN: the campaigns its own lookup listed, else the count its batch check gave
    -- (also when the campaigns came from the model's list: the count is the VIN's, the names are not).
    -- Unknown (NULL) unless the check tells a count: never a zero the service did not give.
    CASE WHEN recall_status <> 'checked' THEN NULL
         WHEN lc.campaigns_listed AND lc.checked_via <> 'model' THEN coalesce(oc.confirmed, 0) ELSE lc.recall_count END
        AS open_recall_count,
    -- Open campaigns only matched through the model's list (`--recall-details model`): likely, not confirmed.
    CASE WHEN lc.vin IS NOT NULL THEN coalesce(oc.likely, 0) END AS likely_recall_count,
    lc.fetched_at AS recalls_checked_at,
    h.title_brands, h.brands_record_count, h.vin_changed, h.fetched_at AS history_fetched_at,
    -- Events on record: 0 when lien/theft answered none, NULL when it was never answered (unknown, not zero).
    CASE WHEN la.vin IS NOT NULL OR lt.vin IS NOT NULL THEN coalesce(lt.lien_theft_events, 0) END AS lien_theft_events,
    lt.lien_theft_event_types,
    -- Park now: an open campaign confirmed for this VIN says park it or park outside. False when its latest
    -- check listed its campaigns (or counted none) and none says so; NULL when never checked, or when only a
    -- count is known (its campaigns not listed yet, or listed for its model only: see park_now_likely).
    CASE WHEN len(pk.confirmed) > 0 THEN true
         WHEN recall_status <> 'checked' THEN NULL
         WHEN (lc.campaigns_listed AND lc.checked_via <> 'model') OR coalesce(lc.recall_count, 0) = 0 THEN false
    END AS park_now,
    CASE WHEN recall_status = 'checked' OR pk.vin IS NOT NULL THEN coalesce(pk.confirmed, []) END AS park_now_campaigns,
    CASE WHEN lc.vin IS NOT NULL OR pk.vin IS NOT NULL THEN coalesce(pk.likely, false) END AS park_now_likely,
    -- Liens still open and a theft not recovered (lien_theft_records); NULL when lien/theft was never answered.
    CASE WHEN la.vin IS NOT NULL OR lt.vin IS NOT NULL THEN coalesce(lt.active_liens, 0) END AS active_liens,
    lt.active_lienholders,
    CASE WHEN lt.stolen THEN true
         WHEN lt.thefts_undecided > 0 THEN NULL
         WHEN la.vin IS NOT NULL OR lt.vin IS NOT NULL THEN false
    END AS stolen_not_recovered
FROM vehicles AS v
LEFT JOIN specs AS s USING (vin)
LEFT JOIN latest_market_values AS mv USING (vin)
LEFT JOIN latest_check AS lc USING (vin)
LEFT JOIN fetch_status AS sf ON sf.vin = v.vin AND sf.dataset = 'specs'
LEFT JOIN open_campaigns AS oc USING (vin)
LEFT JOIN history_reports AS h USING (vin)
LEFT JOIN lien_theft AS lt USING (vin)
LEFT JOIN lien_theft_answered AS la USING (vin)
LEFT JOIN park AS pk USING (vin);
