SELECT vin FROM vehicles ORDER BY vin;
