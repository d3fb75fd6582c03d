SELECT v.vin FROM vehicles AS v ANTI JOIN specs AS s USING (vin) ORDER BY v.vin;
