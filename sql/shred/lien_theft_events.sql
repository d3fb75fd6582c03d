-- /v1/lien-theft answers -> one `lien_theft_events` row per event, numbered from 0 in the order sent.
SELECT vin, CAST(e.i - 1 AS INTEGER) AS event_index, shred_text(e.ev->'event') AS event,
    shred_text(e.ev->'location') AS location,
    list_transform(shred_list(e.ev->'details_list'), lambda d: shred_text(d)) AS details_list,
    CAST(shred_int(body->'year') AS INTEGER) AS year, shred_text(body->'make') AS make,
    shred_text(body->'model') AS model, shred_text(body->'type') AS type, fetched_at
FROM (SELECT vin, body, fetched_at,
             unnest(list_transform(shred_list(body->'events'), lambda ev, i: {'ev': ev, 'i': i})) AS e
      FROM found);
