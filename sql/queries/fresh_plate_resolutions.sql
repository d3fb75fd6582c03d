-- Plates whose latest lookup found a VIN at or after $fresh_after: looked up again, they would cost again.
SELECT plate, state, country, vin, fetched_at
FROM plate_resolutions
QUALIFY row_number() OVER (PARTITION BY country, state, plate ORDER BY fetched_at DESC) = 1
    AND outcome = 'found' AND vin IS NOT NULL AND fetched_at >= $fresh_after::TIMESTAMPTZ
ORDER BY country, state, plate;
