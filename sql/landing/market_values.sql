-- History: one row per VIN, day and request (state, mileage and its unit, condition); a re-fetch the same
-- day replaces it.
MERGE INTO market_values AS t
USING (
    SELECT * REPLACE (coalesce(valued_on, CAST(timezone('UTC', fetched_at) AS DATE)) AS valued_on)
    FROM incoming
    QUALIFY row_number() OVER (
        PARTITION BY vin, coalesce(valued_on, CAST(timezone('UTC', fetched_at) AS DATE)), state, mileage, mileage_unit,
                     condition
        ORDER BY fetched_at DESC) = 1
) AS s
ON t.vin = s.vin AND t.valued_on = s.valued_on AND t.state IS NOT DISTINCT FROM s.state
   AND t.mileage IS NOT DISTINCT FROM s.mileage AND t.mileage_unit IS NOT DISTINCT FROM s.mileage_unit
   AND t.condition IS NOT DISTINCT FROM s.condition
WHEN MATCHED AND s.fetched_at >= t.fetched_at THEN UPDATE
WHEN NOT MATCHED THEN INSERT BY NAME;
