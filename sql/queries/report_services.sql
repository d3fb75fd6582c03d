-- The report's banner: which services the roster's current answers came from (view answer_services), most first.
SELECT service, bool_or(made_up) AS made_up, sum(answers) AS answers, max(newest_answer) AS newest_answer
FROM answer_services
GROUP BY service
ORDER BY answers DESC, service NULLS LAST;
