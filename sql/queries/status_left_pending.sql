-- The VIN-datasets waiting now (vin_status: pending), grouped by dataset, why and since which run: what `fleet
-- status` lists under "Pending". Each group's VINs: SELECT vin FROM vin_status WHERE status = 'pending' AND ...
SELECT dataset, reason, since_run_id, count(*) AS vins, min(since) AS first_since
FROM vin_status WHERE status = 'pending'
GROUP BY dataset, reason, since_run_id
ORDER BY list_position(dataset_names(), replace(dataset, 'recall_details', 'recalls')), dataset = 'recall_details',
         first_since, reason;
