-- /v1/ownership/vin answers -> `ownership_records`: the vehicle and the owners as JSON, with the fields the
-- models declare (connectors/models/ownership.py), in their order; fields the models do not know are left out.
SELECT vin, CAST(len(shred_list(b.owners)) AS INTEGER) AS owner_count,
    CASE WHEN json_type(v) = 'OBJECT' THEN to_json({
        'make': shred_text(v->'make'), 'model': shred_text(v->'model'), 'manufacturer': shred_text(v->'manufacturer'),
        'fuel_type': shred_text(v->'fuel_type'), 'drive_type': shred_text(v->'drive_type'),
        'transmission_type': shred_text(v->'transmission_type'), 'body_type': shred_text(v->'body_type'),
        'body_subtype': shred_text(v->'body_subtype'), 'vehicle_class': shred_text(v->'vehicle_class'),
        'size': shred_text(v->'size'), 'vehicle_type': shred_text(v->'vehicle_type'), 'year': shred_int(v->'year'),
        'doors': shred_int(v->'doors'), 'engine_cylinders': shred_int(v->'engine_cylinders')}) ELSE 'null' END::VARCHAR
        AS vehicle,
    to_json(list_transform(shred_list(b.owners), lambda o: {
        'record_id': shred_text(o->'record_id'), 'first_name': shred_text(o->'first_name'),
        'last_name': shred_text(o->'last_name'), 'age': shred_text(o->'age'), 'gender': shred_text(o->'gender'),
        'address': CASE WHEN json_type(o->'address') = 'OBJECT' THEN {
            'street': shred_text(o->'address'->'street'), 'city': shred_text(o->'address'->'city'),
            'state': shred_text(o->'address'->'state'), 'zip': shred_text(o->'address'->'zip')} END,
        'demographics': CASE WHEN json_type(o->'demographics') = 'OBJECT' THEN {
            'marital_status': shred_text(o->'demographics'->'marital_status'),
            'home_owner': shred_text(o->'demographics'->'home_owner'),
            'children_in_household': shred_text(o->'demographics'->'children_in_household'),
            'veteran_in_household': shred_text(o->'demographics'->'veteran_in_household'),
            'occupation': shred_text(o->'demographics'->'occupation'),
            'income_range': shred_text(o->'demographics'->'income_range'),
            'net_worth_range': shred_text(o->'demographics'->'net_worth_range'),
            'credit_range': shred_text(o->'demographics'->'credit_range')} END,
        'emails': list_transform(shred_list(o->'emails'), lambda m: {
            'address': shred_text(m->'address'), 'last_seen': shred_iso_timestamp(m->'last_seen')}),
        'phones': list_transform(shred_list(o->'phones'), lambda p: {
            'number': shred_text(p->'number'), 'type': shred_text(p->'type'), 'dnc': shred_bool(p->'dnc')}),
        'vehicle_history': list_transform(shred_list(o->'vehicle_history'), lambda h: {
            'make': shred_text(h->'make'), 'model': shred_text(h->'model'), 'year': shred_int(h->'year'),
            'vin': shred_text(h->'vin')})
    }))::VARCHAR AS owners,
    fetched_at
FROM (SELECT vin, fetched_at, b, b.vehicle AS v
      FROM (SELECT vin, fetched_at, json_transform(body, '{"vehicle": "JSON", "owners": "JSON"}') AS b FROM found));
