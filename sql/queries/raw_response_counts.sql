-- How many stored answers each dataset holds.
SELECT dataset, count(*) AS responses FROM raw_responses GROUP BY dataset ORDER BY dataset;
