-- Plates whose latest lookup still stands: found at or after $found_after, or not found (a 404) at or after
-- $not_found_after. Asked again inside those windows, they would only cost a call (and a unit when found).
SELECT plate, state, country, vin, outcome, fetched_at
FROM plate_resolutions
QUALIFY row_number() OVER (PARTITION BY country, state, plate ORDER BY fetched_at DESC) = 1
    AND ((outcome = 'found' AND vin IS NOT NULL AND fetched_at >= $found_after::TIMESTAMPTZ)
         OR (outcome = 'not_found' AND fetched_at >= $not_found_after::TIMESTAMPTZ))
ORDER BY country, state, plate;
