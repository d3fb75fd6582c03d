-- /history answers -> `history_reports` rows (connectors/models/history.py, staging.history_frame): the
-- five arrays' elements kept as JSON text, written as Python's json.dumps(sort_keys=True) writes them;
-- title brands read from brandsInformation (the first of a few spellings present), distinct and sorted.
SELECT vin,
    CAST(shred_int(body->'brandsRecordCount') AS INTEGER) AS brands_record_count,
    shred_bool(body->'vinChanged') AS vin_changed,
    list_sort(list_distinct(list_filter(list_transform(shred_list(body->'brandsInformation'),
        lambda b: coalesce(nullif(shred_text(b->'brand'), ''), nullif(shred_text(b->'brand_name'), ''),
                           nullif(shred_text(b->'brandName'), ''), nullif(shred_text(b->'name'), ''),
                           nullif(shred_text(b->'title_brand'), ''), nullif(shred_text(b->'code'), ''),
                           nullif(shred_text(b->'brand_code'), ''))),
        lambda x: x IS NOT NULL))) AS title_brands,
    list_transform(shred_list(body->'junkAndSalvageInformation'), lambda i: shred_py_json(i)) AS junk_and_salvage_information,
    list_transform(shred_list(body->'insuranceInformation'), lambda i: shred_py_json(i)) AS insurance_information,
    list_transform(shred_list(body->'brandsInformation'), lambda i: shred_py_json(i)) AS brands_information,
    list_transform(shred_list(body->'currentTitleInformation'), lambda i: shred_py_json(i)) AS current_title_information,
    list_transform(shred_list(body->'historyInformation'), lambda i: shred_py_json(i)) AS history_information,
    fetched_at
FROM found;
