SELECT *, strftime(valued_on, '%Y-%m') AS valued_month, vin_bucket(vin) AS vin_bucket FROM market_values;
