-- Title brands new or gone, and odometer readings lower than an earlier one, since the VIN's previous
-- history answer (fetch_status: a report, or "no data" = no brands, no readings). Compared before the
-- report is replaced; an answer not newer than the last one (in the order answers arrived: run_seq, then
-- fetched_at) is no change.
CREATE OR REPLACE TEMP TABLE history_answers AS
SELECT i.run_id, i.vin, i.fetched_at,
       coalesce(i.title_brands, list_filter(list_transform(i.brands_information,
           lambda b: coalesce(b->>'brand', b->>'name', b->>'title_brand', b->>'brandName', b->>'description')),
           lambda x: x IS NOT NULL), []) AS brands_now,
       coalesce(h.title_brands, []) AS brands_before,
       coalesce(i.history_information, []) || coalesce(i.current_title_information, []) AS readings_now,
       coalesce(h.history_information, []) || coalesce(h.current_title_information, []) AS readings_before
FROM (SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY vin ORDER BY run_seq DESC, fetched_at DESC) = 1) AS i
JOIN fetch_status AS f ON f.vin = i.vin AND f.dataset = 'history' AND (f.run_seq, f.fetched_at) < (i.run_seq, i.fetched_at)
LEFT JOIN history_reports AS h ON h.vin = i.vin AND (h.run_seq, h.fetched_at) < (i.run_seq, i.fetched_at)
-- Most reports come back as they were: only those whose brands or readings differ are looked into.
WHERE brands_now IS DISTINCT FROM brands_before OR readings_now IS DISTINCT FROM readings_before;

INSERT INTO changes BY NAME
SELECT run_id, vin, 'history' AS dataset, 'new_title_brand' AS kind, brand AS subject, 'high' AS severity,
       to_json(brands_before) AS before, to_json(brands_now) AS after, fetched_at, now() AS detected_at
FROM history_answers, unnest(list_filter(brands_now, lambda b: NOT list_contains(brands_before, b))) AS t(brand)
UNION ALL
SELECT run_id, vin, 'history' AS dataset, 'cleared_title_brand' AS kind, brand AS subject, 'info' AS severity,
       to_json(brands_before) AS before, to_json(brands_now) AS after, fetched_at, now() AS detected_at
FROM history_answers, unnest(list_filter(brands_before, lambda b: NOT list_contains(brands_now, b))) AS t(brand)
ON CONFLICT DO NOTHING;

-- Readings: the history elements' date and odometer (the spec does not name the fields: the first present
-- of a few spellings). A reading new in this answer that is lower than an earlier-dated one is a rollback.
INSERT INTO changes BY NAME
WITH readings AS (
    SELECT run_id, vin, fetched_at, 'now' AS answer, unnest(readings_now) AS e FROM history_answers
    UNION ALL
    SELECT run_id, vin, fetched_at, 'before' AS answer, unnest(readings_before) AS e FROM history_answers
), typed AS (
    SELECT DISTINCT run_id, vin, fetched_at, answer,
           TRY_CAST(coalesce(e->>'date', e->>'event_date', e->>'eventDate', e->>'title_date') AS DATE) AS read_on,
           TRY_CAST(coalesce(e->>'odometer', e->>'odometer_reading', e->>'odometerReading', e->>'mileage') AS DOUBLE)
               AS odometer
    FROM readings
), usable AS (
    SELECT * FROM typed WHERE read_on IS NOT NULL AND odometer IS NOT NULL
), new_readings AS (
    SELECT * FROM usable AS n
    WHERE answer = 'now' AND NOT EXISTS (SELECT 1 FROM usable AS b WHERE b.vin = n.vin AND b.answer = 'before'
                                           AND b.read_on = n.read_on AND b.odometer = n.odometer)
)
SELECT n.run_id, n.vin, 'history' AS dataset, 'odometer_rollback' AS kind, CAST(n.read_on AS VARCHAR) AS subject,
       'high' AS severity,
       json_object('date', CAST(e.read_on AS VARCHAR), 'odometer', e.odometer) AS before,
       json_object('date', CAST(n.read_on AS VARCHAR), 'odometer', n.odometer) AS after,
       n.fetched_at, now() AS detected_at
FROM new_readings AS n
JOIN usable AS e ON e.vin = n.vin AND e.read_on < n.read_on AND e.odometer > n.odometer
QUALIFY row_number() OVER (PARTITION BY n.vin, n.read_on ORDER BY e.odometer DESC, e.read_on, n.odometer) = 1
ON CONFLICT DO NOTHING;

DROP TABLE history_answers;
