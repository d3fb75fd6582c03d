-- /history answers -> `history_reports` rows (connectors/models/history.py, staging.history_frame): the
-- five arrays' elements kept as JSON text, written as Python's json.dumps(sort_keys=True) writes them;
-- title brands read from brandsInformation (the first of a few spellings present), distinct and sorted. The
-- body is parsed once (json_transform).
SELECT vin,
    CAST(shred_int(b.brandsRecordCount) AS INTEGER) AS brands_record_count,
    shred_bool(b.vinChanged) AS vin_changed,
    list_sort(list_distinct(list_filter(list_transform(shred_list(b.brandsInformation),
        lambda b: coalesce(nullif(shred_text(b->'brand'), ''), nullif(shred_text(b->'brand_name'), ''),
                           nullif(shred_text(b->'brandName'), ''), nullif(shred_text(b->'name'), ''),
                           nullif(shred_text(b->'title_brand'), ''), nullif(shred_text(b->'code'), ''),
                           nullif(shred_text(b->'brand_code'), ''))),
        lambda x: x IS NOT NULL))) AS title_brands,
    list_transform(shred_list(b.junkAndSalvageInformation), lambda i: shred_py_json(i)) AS junk_and_salvage_information,
    list_transform(shred_list(b.insuranceInformation), lambda i: shred_py_json(i)) AS insurance_information,
    list_transform(shred_list(b.brandsInformation), lambda i: shred_py_json(i)) AS brands_information,
    list_transform(shred_list(b.currentTitleInformation), lambda i: shred_py_json(i)) AS current_title_information,
    list_transform(shred_list(b.historyInformation), lambda i: shred_py_json(i)) AS history_information,
    fetched_at
FROM (SELECT vin, fetched_at, json_transform(body, '{"brandsRecordCount": "JSON", "vinChanged": "JSON",
          "brandsInformation": "JSON", "junkAndSalvageInformation": "JSON", "insuranceInformation": "JSON",
          "currentTitleInformation": "JSON", "historyInformation": "JSON"}') AS b
      FROM found);
