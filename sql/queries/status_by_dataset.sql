-- Per dataset (every one of $datasets, and any other with a VIN in a state other than never asked), how many
-- roster VINs are in each status of the view vin_status (recall_details: the VINs whose check counted recalls),
-- of the failed how many are worth asking again, and the latest answer. What `fleet status` shows.
SELECT dataset, count(*) AS vins,
       count(*) FILTER (WHERE status = 'answered') AS answered,
       count(*) FILTER (WHERE status = 'no_data') AS no_data,
       count(*) FILTER (WHERE status = 'not_applicable') AS not_applicable,
       count(*) FILTER (WHERE status = 'pending') AS pending,
       count(*) FILTER (WHERE status = 'failed') AS failed,
       count(*) FILTER (WHERE status = 'failed' AND retryable) AS failed_retryable,
       count(*) FILTER (WHERE status = 'never_asked') AS never_asked,
       max(answered_at) AS last_fetched_at
FROM vin_status
GROUP BY dataset
HAVING list_contains($datasets::VARCHAR[], dataset) OR count(*) FILTER (WHERE status <> 'never_asked') > 0
ORDER BY list_position(dataset_names(), replace(dataset, 'recall_details', 'recalls')), dataset = 'recall_details';
