-- What the result models' edge parsers do (connectors/models/base.py), as SQL over JSON values, so a
-- staged answer shreds into the same typed values the models give. Re-created on every shredding connection.

-- The leaves these read are JSON text as DuckDB writes it (minified: a string starts with its quote), so
-- the common cases are told apart by their first character, without parsing the leaf again.

-- Text: a string as is, any other scalar as its text (a number the spec calls a string), null as NULL.
CREATE OR REPLACE TEMP MACRO shred_text(j) AS
    CASE WHEN j IS NULL OR j = 'null' THEN NULL
        WHEN starts_with(j, '"') THEN CASE WHEN contains(j, '\') THEN j->>'$' ELSE CAST(j AS VARCHAR)[2:-2] END
        WHEN j = 'true' THEN 'True' WHEN j = 'false' THEN 'False'
        ELSE j->>'$' END;

-- A string leaf's text without ",", "$" and blanks ("$25,400" -> "25400"). A leaf without a backslash holds
-- no escaped (control) character, so dropping spaces there is what dropping \s is.
CREATE OR REPLACE TEMP MACRO shred_bare(j) AS
    CASE WHEN contains(j, '\') THEN regexp_replace(shred_text(j), '[,$\s]', '', 'g')
         ELSE replace(replace(replace(CAST(j AS VARCHAR)[2:-2], ',', ''), '$', ''), ' ', '') END;

-- Number: JSON numbers, and strings once ",", "$" and blanks are gone ("$25,400"); anything else is NULL.
CREATE OR REPLACE TEMP MACRO shred_number(j) AS
    CASE WHEN starts_with(j, '"') THEN TRY_CAST(nullif(shred_bare(j), '') AS DOUBLE)
        WHEN starts_with(j, '{') OR starts_with(j, '[') THEN NULL
        ELSE TRY_CAST(CAST(j AS VARCHAR) AS DOUBLE) END;

-- Money: a number in dollars to the cent, DECIMAL(12,2) as market_values holds it; beyond it is NULL.
CREATE OR REPLACE TEMP MACRO shred_money(j) AS TRY_CAST(shred_number(j) AS DECIMAL(12,2));

-- A day: text YYYY-MM-DD, or an ISO 8601 timestamp's day as written; anything else is NULL (iso_day in views).
CREATE OR REPLACE TEMP MACRO shred_day(j) AS
    CASE WHEN regexp_matches(trim(shred_text(j)), '^\d{4}-\d{2}-\d{2}(T.*)?$')
         THEN CAST(try_strptime(left(trim(shred_text(j)), 10), '%Y-%m-%d') AS DATE) END;

-- Integer: a number that is whole ("Unlimited", "", 2.5 are NULL). Digits alone (no fraction, exponent or
-- hex) are cast as they are; the rest goes through `shred_number`.
CREATE OR REPLACE TEMP MACRO shred_digits(t) AS
    NOT contains(t, '.') AND NOT contains(lower(t), 'e') AND NOT contains(lower(t), 'x');
CREATE OR REPLACE TEMP MACRO shred_int(j) AS
    CASE WHEN starts_with(j, '"') AND NOT contains(j, '\') AND shred_digits(shred_bare(j))
         THEN TRY_CAST(shred_bare(j) AS BIGINT)
         WHEN NOT starts_with(j, '"') AND shred_digits(CAST(j AS VARCHAR)) THEN TRY_CAST(CAST(j AS VARCHAR) AS BIGINT)
         WHEN isfinite(shred_number(j)) AND shred_number(j) = floor(shred_number(j))
         THEN TRY_CAST(shred_number(j) AS BIGINT) END;

-- bool | None as pydantic reads it (lax): true/false, 0/1, and the words it knows.
CREATE OR REPLACE TEMP MACRO shred_bool(j) AS
    CASE json_type(j) WHEN 'BOOLEAN' THEN j::VARCHAR = 'true'
        WHEN 'VARCHAR' THEN CASE WHEN lower(j->>'$') IN ('1', 'on', 't', 'true', 'y', 'yes') THEN true
                                 WHEN lower(j->>'$') IN ('0', 'off', 'f', 'false', 'n', 'no') THEN false END
        WHEN 'BIGINT' THEN CASE TRY_CAST(j->>'$' AS DOUBLE) WHEN 1 THEN true WHEN 0 THEN false END
        WHEN 'UBIGINT' THEN CASE TRY_CAST(j->>'$' AS DOUBLE) WHEN 1 THEN true WHEN 0 THEN false END
        WHEN 'DOUBLE' THEN CASE TRY_CAST(j->>'$' AS DOUBLE) WHEN 1 THEN true WHEN 0 THEN false END
        ELSE NULL END;

-- A JSON array as a list of JSON values ([] when absent or null, as the models' default_factory=list).
CREATE OR REPLACE TEMP MACRO shred_list(j) AS
    CASE WHEN json_type(j) = 'ARRAY' THEN CAST(j AS JSON[]) ELSE []::JSON[] END;

-- A JSON object as its (key, value) entries in the order sent.
CREATE OR REPLACE TEMP MACRO shred_entries(j) AS
    CASE WHEN json_type(j) = 'OBJECT' THEN map_entries(CAST(j AS MAP(VARCHAR, JSON))) END;

-- A flat object as Python's json.dumps(item, sort_keys=True) writes it (the history arrays' elements).
CREATE OR REPLACE TEMP MACRO shred_py_json(j) AS
    '{' || array_to_string(list_transform(list_sort(shred_entries(j)),
                                          lambda e: to_json(e.key) || ': ' || coalesce(e.value::VARCHAR, 'null')), ', ') || '}';

-- `report_received_date` is day/month/year, else ISO.
CREATE OR REPLACE TEMP MACRO shred_dmy_date(j) AS
    CAST(coalesce(try_strptime(trim(shred_text(j)), '%d/%m/%Y'), try_strptime(trim(shred_text(j)), '%Y-%m-%d')) AS DATE);

-- A timestamp as the models give it back in JSON (ISO 8601, `T`, seconds, microseconds when any, `Z` for UTC);
-- text that is not ISO 8601 is NULL.
CREATE OR REPLACE TEMP MACRO shred_iso_parts(j) AS
    regexp_extract(trim(shred_text(j)),
                   '^(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?))?(Z|[+-]\d{2}:\d{2})?$',
                   ['day', 'time', 'zone']);
CREATE OR REPLACE TEMP MACRO shred_iso_value(p) AS
    TRY_CAST(nullif(p.day, '') || ' ' || coalesce(nullif(p.time, ''), '00:00') AS TIMESTAMP);
CREATE OR REPLACE TEMP MACRO shred_iso_format(p) AS
    strftime(shred_iso_value(p), '%Y-%m-%dT%H:%M:%S')
    || CASE WHEN microsecond(shred_iso_value(p)) % 1000000 > 0
            THEN '.' || lpad(CAST(microsecond(shred_iso_value(p)) % 1000000 AS VARCHAR), 6, '0') ELSE '' END
    || CASE WHEN p.zone IN ('Z', '+00:00', '-00:00') THEN 'Z' ELSE p.zone END;
CREATE OR REPLACE TEMP MACRO shred_iso_timestamp(j) AS shred_iso_format(shred_iso_parts(j));
