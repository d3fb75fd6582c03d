-- Helpers the views and the lake export share (views are re-created on every open, these first).
-- Files here run in name order: 00 helpers, 01 typed views over one table, 02+ views that combine them.

-- A day the service sent as text: YYYY-MM-DD, or an ISO 8601 timestamp (its day as written, e.g. the
-- vendor's `2016-12-06T00:00:00.000Z`). Anything else is NULL, never a guess.
CREATE OR REPLACE MACRO iso_day(text) AS
    CASE WHEN regexp_matches(trim(text), '^\d{4}-\d{2}-\d{2}(T.*)?$')
         THEN CAST(try_strptime(left(trim(text), 10), '%Y-%m-%d') AS DATE) END;

-- As iso_day, and also MM/DD/YYYY: the US order the vendor documents for lien/theft and title records.
CREATE OR REPLACE MACRO service_date(text) AS
    coalesce(iso_day(text),
             CASE WHEN regexp_matches(trim(text), '^\d{1,2}/\d{1,2}/\d{4}$')
                  THEN CAST(try_strptime(trim(text), '%m/%d/%Y') AS DATE) END);

-- The lake's file for a VIN: one of 16 buckets, from the VIN's md5 (stable across DuckDB versions).
CREATE OR REPLACE MACRO vin_bucket(vin) AS
    coalesce(CAST(('0x' || left(md5(vin), 2)) AS INTEGER) % 16, 0);
