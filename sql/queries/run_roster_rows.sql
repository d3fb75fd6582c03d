-- This run's roster rows for $vins, whole: a VIN found by plate that the run already lists is a duplicate of it.
SELECT * FROM vehicles WHERE run_id = $run_id AND list_contains($vins::VARCHAR[], vin) ORDER BY vin;
