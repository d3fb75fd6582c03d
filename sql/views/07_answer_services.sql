-- Which service the roster's current answers came from, per dataset (the published file says where its data came
-- from): the embedded sandbox's are made up (a local emulator, used when no key is set); NULL: landed before
-- services were recorded. One row per service and dataset.
CREATE OR REPLACE VIEW answer_services AS
SELECT f.service, f.service = 'embedded sandbox' AS made_up, f.dataset,
       count(*) AS answers, count(DISTINCT f.vin) AS vehicles,
       min(f.fetched_at) AS oldest_answer, max(f.fetched_at) AS newest_answer,
       arg_max(f.run_id, (f.run_seq, f.fetched_at)) AS latest_run_id
FROM fetch_status AS f
SEMI JOIN vehicles AS v ON v.vin = f.vin
GROUP BY f.service, f.dataset
ORDER BY f.service NULLS LAST, f.dataset;
