SELECT *, strftime(valued_on, '%Y-%m') AS valued_month FROM market_values;
