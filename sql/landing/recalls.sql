-- One row per VIN and campaign, with first/last seen; a campaign seen again after closing reopens.
-- `matched_by` ranks the evidence: the VIN's own answer (`vin`) confirms, a year/make/model list (`model`) only
-- makes likely. A model list never downgrades an open campaign confirmed for the VIN, and closes only what no
-- VIN-level answer confirmed (sql/landing/recall_checks.sql): a cheaper run never drops a vehicle to park.
UPDATE incoming SET first_seen_at = fetched_at, first_seen_run_id = run_id, last_seen_at = fetched_at, closed_at = NULL,
    matched_by = coalesce(matched_by, 'vin');

MERGE INTO recalls AS t
USING (SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY vin, nhtsa_campaign_number ORDER BY fetched_at DESC) = 1) AS s
ON t.vin = s.vin AND t.nhtsa_campaign_number = s.nhtsa_campaign_number
WHEN MATCHED THEN UPDATE SET
    manufacturer = CASE WHEN s.fetched_at >= t.last_seen_at THEN s.manufacturer ELSE t.manufacturer END,
    park_it = CASE WHEN s.fetched_at >= t.last_seen_at THEN s.park_it ELSE t.park_it END,
    park_outside = CASE WHEN s.fetched_at >= t.last_seen_at THEN s.park_outside ELSE t.park_outside END,
    over_the_air_update = CASE WHEN s.fetched_at >= t.last_seen_at THEN s.over_the_air_update ELSE t.over_the_air_update END,
    report_received_date = CASE WHEN s.fetched_at >= t.last_seen_at THEN s.report_received_date ELSE t.report_received_date END,
    component = CASE WHEN s.fetched_at >= t.last_seen_at THEN s.component ELSE t.component END,
    summary = CASE WHEN s.fetched_at >= t.last_seen_at THEN s.summary ELSE t.summary END,
    consequence = CASE WHEN s.fetched_at >= t.last_seen_at THEN s.consequence ELSE t.consequence END,
    remedy = CASE WHEN s.fetched_at >= t.last_seen_at THEN s.remedy ELSE t.remedy END,
    notes = CASE WHEN s.fetched_at >= t.last_seen_at THEN s.notes ELSE t.notes END,
    matched_by = CASE WHEN s.fetched_at < t.last_seen_at THEN t.matched_by
                      WHEN s.matched_by = 'model' AND t.matched_by = 'vin' AND t.closed_at IS NULL THEN 'vin'
                      ELSE s.matched_by END,
    first_seen_run_id = CASE WHEN s.fetched_at < t.first_seen_at THEN s.run_id ELSE t.first_seen_run_id END,
    first_seen_at = least(t.first_seen_at, s.fetched_at),
    closed_at = CASE WHEN t.closed_at IS NOT NULL AND s.fetched_at >= t.closed_at THEN NULL ELSE t.closed_at END,
    run_id = CASE WHEN s.fetched_at >= t.last_seen_at THEN s.run_id ELSE t.run_id END,
    last_seen_at = greatest(t.last_seen_at, s.fetched_at),
    fetched_at = greatest(t.fetched_at, s.fetched_at)
WHEN NOT MATCHED THEN INSERT BY NAME;

-- A newer complete check that no longer listed the campaign closes it again: any for a campaign only likely,
-- one for the VIN (its lookup, or a batch count of 0) for a confirmed one.
UPDATE recalls AS r
SET closed_at = CASE WHEN r.matched_by = 'model' THEN c.listed_at ELSE c.vin_listed_at END
FROM (
    SELECT vin, max(fetched_at) AS listed_at, max(fetched_at) FILTER (WHERE checked_via <> 'model') AS vin_listed_at
    FROM recall_checks WHERE campaigns_listed GROUP BY vin
) AS c
WHERE r.vin = c.vin AND r.vin IN (SELECT vin FROM incoming)
  AND r.closed_at IS NULL AND r.last_seen_at < CASE WHEN r.matched_by = 'model' THEN c.listed_at ELSE c.vin_listed_at END;
