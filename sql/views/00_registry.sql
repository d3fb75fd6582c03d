-- Generated from tasks/ingest/markets.py and tasks/datasets.py (python -m fleet_data.tasks.ingest.markets); do not edit.
-- The planner's rules as macros, for views that say per VIN what each dataset can answer (vin_status).

-- A code as the fleet file gives it, compared as the planner compares it: trimmed of white space, upper case.
CREATE OR REPLACE MACRO fleet_code(text) AS upper(trim(CAST(text AS VARCHAR), ' ' || chr(9) || chr(10) || chr(11) || chr(12) || chr(13)));

-- Where a vehicle is registered, first match wins: the file's country (ISO alpha-2 or a known name), its state
-- or province (US, then Canada, then Australia), a North American VIN (first character 1-5) or one /specs decoded
-- without its international fallback ('north_america'), else 'international'.
CREATE OR REPLACE MACRO vehicle_market(vin, state, country, specs_international) AS coalesce(
    CASE fleet_code(country)
        WHEN 'USA' THEN 'US'
        WHEN 'UNITED STATES' THEN 'US'
        WHEN 'UNITED STATES OF AMERICA' THEN 'US'
        WHEN 'CANADA' THEN 'CA'
        WHEN 'MEXICO' THEN 'MX'
        WHEN 'MÉXICO' THEN 'MX'
        WHEN 'AUSTRALIA' THEN 'AU'
        WHEN 'UK' THEN 'GB'
        WHEN 'UNITED KINGDOM' THEN 'GB'
        WHEN 'GREAT BRITAIN' THEN 'GB'
        WHEN 'GERMANY' THEN 'DE'
        WHEN 'DEUTSCHLAND' THEN 'DE'
        WHEN 'FRANCE' THEN 'FR'
        WHEN 'SPAIN' THEN 'ES'
        WHEN 'ITALY' THEN 'IT'
        WHEN 'JAPAN' THEN 'JP'
    END,
    CASE WHEN regexp_full_match(fleet_code(country), '[A-Z]{2}') THEN fleet_code(country) END,
    CASE WHEN fleet_code(state) IN ('AK', 'AL', 'AR', 'AZ', 'CA', 'CO', 'CT', 'DC', 'DE', 'FL', 'GA', 'HI', 'IA', 'ID', 'IL', 'IN', 'KS', 'KY', 'LA', 'MA', 'MD', 'ME', 'MI', 'MN', 'MO', 'MS', 'MT', 'NC', 'ND', 'NE', 'NH', 'NJ', 'NM', 'NV', 'NY', 'OH', 'OK', 'OR', 'PA', 'PR', 'RI', 'SC', 'SD', 'TN', 'TX', 'UT', 'VA', 'VT', 'WA', 'WI', 'WV', 'WY') THEN 'US'
         WHEN fleet_code(state) IN ('AB', 'BC', 'MB', 'NB', 'NL', 'NS', 'NT', 'NU', 'ON', 'PE', 'QC', 'SK', 'YT') THEN 'CA'
         WHEN fleet_code(state) IN ('ACT', 'NSW', 'NT', 'QLD', 'SA', 'TAS', 'VIC', 'WA') THEN 'AU' END,
    CASE WHEN left(vin, 1) IN ('1', '2', '3', '4', '5') OR coalesce(NOT specs_international, false)
         THEN 'north_america' ELSE 'international' END);

-- The datasets, in the registry's order.
CREATE OR REPLACE MACRO dataset_names() AS ['specs', 'market_value', 'history', 'lien_theft', 'recalls', 'ownership'];

-- Whether a dataset (or recall_details, the recalls' campaigns) answers for a vehicle of `market`.
CREATE OR REPLACE MACRO dataset_applies(dataset, market) AS CASE dataset
    WHEN 'market_value' THEN market IN ('CA', 'US', 'north_america')
    WHEN 'history' THEN market IN ('US', 'north_america')
    WHEN 'lien_theft' THEN market IN ('US', 'north_america')
    WHEN 'recalls' THEN market IN ('CA', 'MX', 'US', 'north_america')
    WHEN 'recall_details' THEN market IN ('CA', 'MX', 'US', 'north_america')
    ELSE true END;

-- The markets a dataset answers for, as words; NULL: every vehicle.
CREATE OR REPLACE MACRO dataset_markets(dataset) AS CASE dataset
    WHEN 'market_value' THEN 'CA, US'
    WHEN 'history' THEN 'US'
    WHEN 'lien_theft' THEN 'US'
    WHEN 'recalls' THEN 'CA, MX, US'
    WHEN 'recall_details' THEN 'CA, MX, US'
    END;
