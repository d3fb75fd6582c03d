-- Plates whose latest lookup (latest in the order answers arrived: run_seq, then fetched_at) still stands: found
-- at or after $found_after, or not found (a 404) at or after $not_found_after, by $service (or before services
-- were recorded: NULL), and not dated beyond $future_after (a clock ahead). Asked again inside those windows,
-- they would only cost a call (and a unit when found); a VIN another service found is no VIN of this one's.
-- A NULL $service or $future_after leaves that rule out.
SELECT plate, state, country, vin, outcome, fetched_at
FROM plate_resolutions
QUALIFY row_number() OVER (PARTITION BY country, state, plate ORDER BY run_seq DESC, fetched_at DESC) = 1
    AND ((outcome = 'found' AND vin IS NOT NULL AND fetched_at >= $found_after::TIMESTAMPTZ)
         OR (outcome = 'not_found' AND fetched_at >= $not_found_after::TIMESTAMPTZ))
    AND (service IS NULL OR $service::VARCHAR IS NULL OR service = $service::VARCHAR)
    AND ($future_after::TIMESTAMPTZ IS NULL OR fetched_at <= $future_after::TIMESTAMPTZ)
ORDER BY country, state, plate;
