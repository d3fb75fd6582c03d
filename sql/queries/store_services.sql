-- Which services the answers held came from (NULL: landed before services were recorded, migration 0012), with
-- the rows of each: current answers (fetch_status), stored answers (raw_responses), recall checks, plate lookups.
-- Read before a command starts (tasks/plan/provenance.py): the embedded sandbox never lands among another's.
SELECT service, sum(n) AS answers
FROM (SELECT service, count(*) AS n FROM fetch_status GROUP BY service
      UNION ALL SELECT service, count(*) FROM raw_responses GROUP BY service
      UNION ALL SELECT service, count(*) FROM recall_checks GROUP BY service
      UNION ALL SELECT service, count(*) FROM plate_resolutions GROUP BY service)
GROUP BY service
ORDER BY answers DESC, service;
