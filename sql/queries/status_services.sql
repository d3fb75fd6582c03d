-- Which services the roster's current answers (fetch_status) came from: per service, the answers, the VINs and
-- datasets they cover, the oldest and newest; NULL: landed before services were recorded. Also the answers dated
-- after $future_after (a clock that was ahead: never fresh, the next refresh asks again).
SELECT f.service, count(*) AS answers, count(DISTINCT f.vin) AS vins, list(DISTINCT f.dataset ORDER BY f.dataset) AS datasets,
       min(f.fetched_at) AS oldest_answer, max(f.fetched_at) AS newest_answer,
       count(*) FILTER (WHERE f.fetched_at > $future_after::TIMESTAMPTZ) AS dated_in_the_future
FROM fetch_status AS f
SEMI JOIN vehicles AS v ON v.vin = f.vin
GROUP BY f.service
ORDER BY answers DESC, f.service NULLS LAST;
