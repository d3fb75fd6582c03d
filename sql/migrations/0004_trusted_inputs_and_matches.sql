-- Data an analyst can trust: how each recall campaign was matched to a VIN, the valuation inputs
-- read from the fleet file, and replayed calls that the service did not bill again.

-- vin: the VIN's own lookup listed the campaign (confirmed); model: its year/make/model's list
-- did, and only the batch's count was the VIN's own (likely).
ALTER TABLE recalls ADD COLUMN matched_by VARCHAR DEFAULT 'vin';
UPDATE recalls AS r SET matched_by = 'model'
FROM recall_checks AS c
WHERE c.vin = r.vin AND c.checked_via = 'model' AND c.fetched_at = r.last_seen_at;

-- The condition as the spec spells it (excellent, clean, average, rough), the cell as written when
-- it is none of those, and the unit of `mileage` (mi or km) as the file gives it.
ALTER TABLE vehicles ADD COLUMN condition VARCHAR;
ALTER TABLE vehicles ADD COLUMN condition_rejected VARCHAR;
ALTER TABLE vehicles ADD COLUMN mileage_unit VARCHAR;

-- The unit of the mileage sent with a valuation: miles in the US, kilometres in Canada.
ALTER TABLE market_values ADD COLUMN mileage_unit VARCHAR;
UPDATE market_values SET mileage_unit = 'mi' WHERE mileage IS NOT NULL;

-- A POST answered again from its idempotency key (`Idempotent-Replayed: true`): billed 0 units.
ALTER TABLE api_calls ADD COLUMN replayed BOOLEAN DEFAULT false;
