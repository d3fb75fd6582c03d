-- `store_services` of a file published before migration 0012: every answer it holds is of an unknown service.
SELECT CAST(NULL AS VARCHAR) AS service, sum(n) AS answers
FROM (SELECT count(*) AS n FROM fetch_status UNION ALL SELECT count(*) FROM raw_responses
      UNION ALL SELECT count(*) FROM recall_checks UNION ALL SELECT count(*) FROM plate_resolutions)
HAVING sum(n) > 0;
