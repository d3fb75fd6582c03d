-- One row per VIN and campaign, with first/last seen; a campaign seen again after closing reopens. First, last and
-- after are in the order answers arrived, (run_seq, fetched_at): run_seq is that of the latest run that saw it.
-- `matched_by` ranks the evidence: the VIN's own answer (`vin`) confirms, a year/make/model list (`model`) only
-- makes likely. A model list never downgrades an open campaign confirmed for the VIN, and closes only what no
-- VIN-level answer confirmed (sql/landing/recall_checks.sql): a cheaper run never drops a vehicle to park.
UPDATE incoming SET first_seen_at = fetched_at, first_seen_run_id = run_id, last_seen_at = fetched_at, closed_at = NULL,
    matched_by = coalesce(matched_by, 'vin');

MERGE INTO recalls AS t
USING (SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY vin, nhtsa_campaign_number ORDER BY run_seq DESC, fetched_at DESC) = 1) AS s
ON t.vin = s.vin AND t.nhtsa_campaign_number = s.nhtsa_campaign_number
WHEN MATCHED THEN UPDATE SET
    manufacturer = CASE WHEN (s.run_seq, s.fetched_at) >= (t.run_seq, t.last_seen_at) THEN s.manufacturer ELSE t.manufacturer END,
    park_it = CASE WHEN (s.run_seq, s.fetched_at) >= (t.run_seq, t.last_seen_at) THEN s.park_it ELSE t.park_it END,
    park_outside = CASE WHEN (s.run_seq, s.fetched_at) >= (t.run_seq, t.last_seen_at) THEN s.park_outside ELSE t.park_outside END,
    over_the_air_update = CASE WHEN (s.run_seq, s.fetched_at) >= (t.run_seq, t.last_seen_at) THEN s.over_the_air_update ELSE t.over_the_air_update END,
    report_received_date = CASE WHEN (s.run_seq, s.fetched_at) >= (t.run_seq, t.last_seen_at) THEN s.report_received_date ELSE t.report_received_date END,
    component = CASE WHEN (s.run_seq, s.fetched_at) >= (t.run_seq, t.last_seen_at) THEN s.component ELSE t.component END,
    summary = CASE WHEN (s.run_seq, s.fetched_at) >= (t.run_seq, t.last_seen_at) THEN s.summary ELSE t.summary END,
    consequence = CASE WHEN (s.run_seq, s.fetched_at) >= (t.run_seq, t.last_seen_at) THEN s.consequence ELSE t.consequence END,
    remedy = CASE WHEN (s.run_seq, s.fetched_at) >= (t.run_seq, t.last_seen_at) THEN s.remedy ELSE t.remedy END,
    notes = CASE WHEN (s.run_seq, s.fetched_at) >= (t.run_seq, t.last_seen_at) THEN s.notes ELSE t.notes END,
    matched_by = CASE WHEN (s.run_seq, s.fetched_at) < (t.run_seq, t.last_seen_at) THEN t.matched_by
                      WHEN s.matched_by = 'model' AND t.matched_by = 'vin' AND t.closed_at IS NULL THEN 'vin'
                      ELSE s.matched_by END,
    first_seen_run_id = CASE WHEN (s.run_seq, s.fetched_at) < (coalesce((SELECT r.run_seq FROM runs AS r
                                 WHERE r.run_id = t.first_seen_run_id), 0), t.first_seen_at)
                             THEN s.run_id ELSE t.first_seen_run_id END,
    first_seen_at = CASE WHEN (s.run_seq, s.fetched_at) < (coalesce((SELECT r.run_seq FROM runs AS r
                             WHERE r.run_id = t.first_seen_run_id), 0), t.first_seen_at)
                         THEN s.fetched_at ELSE t.first_seen_at END,
    -- Reopened by a sighting at or after the complete check that closed it (that check: its VIN's, at closed_at).
    closed_at = CASE WHEN t.closed_at IS NOT NULL AND (s.run_seq, s.fetched_at) >= (coalesce((SELECT max(c.run_seq)
                         FROM recall_checks AS c WHERE c.vin = t.vin AND c.campaigns_listed AND c.fetched_at = t.closed_at), 0),
                         t.closed_at)
                     THEN NULL ELSE t.closed_at END,
    run_id = CASE WHEN (s.run_seq, s.fetched_at) >= (t.run_seq, t.last_seen_at) THEN s.run_id ELSE t.run_id END,
    service = CASE WHEN (s.run_seq, s.fetched_at) >= (t.run_seq, t.last_seen_at) THEN s.service ELSE t.service END,
    fetched_at = CASE WHEN (s.run_seq, s.fetched_at) >= (t.run_seq, t.last_seen_at) THEN s.fetched_at ELSE t.fetched_at END,
    last_seen_at = CASE WHEN (s.run_seq, s.fetched_at) >= (t.run_seq, t.last_seen_at) THEN s.fetched_at ELSE t.last_seen_at END,
    run_seq = greatest(t.run_seq, s.run_seq)
WHEN NOT MATCHED THEN INSERT BY NAME;

-- A newer complete check that no longer listed the campaign closes it again: any for a campaign only likely,
-- one for the VIN (its lookup, or a batch count of 0) for a confirmed one.
UPDATE recalls AS r
SET closed_at = CASE WHEN r.matched_by = 'model' THEN c.listed_at ELSE c.vin_listed_at END
FROM (
    SELECT vin, max(run_seq) AS listed_seq, arg_max(fetched_at, (run_seq, fetched_at)) AS listed_at,
           max(run_seq) FILTER (WHERE checked_via <> 'model') AS vin_listed_seq,
           arg_max(fetched_at, (run_seq, fetched_at)) FILTER (WHERE checked_via <> 'model') AS vin_listed_at
    FROM recall_checks WHERE campaigns_listed GROUP BY vin
) AS c
WHERE r.vin = c.vin AND r.vin IN (SELECT vin FROM incoming) AND r.closed_at IS NULL
  AND CASE WHEN r.matched_by = 'model' THEN (r.run_seq, r.last_seen_at) < (c.listed_seq, c.listed_at)
           ELSE (r.run_seq, r.last_seen_at) < (c.vin_listed_seq, c.vin_listed_at) END;
