-- Whether a call's cost is known. `known`: the service answered, `units` is what it billed. `unknown`: no
-- answer arrived (the process was killed with the call in flight, a timeout, a dropped connection), yet the
-- service may have billed it: `units` is what it may have cost by the spec's pricing, so `sum(units)` never
-- falls short of what the service billed (docs/ledger.md).
ALTER TABLE api_calls ADD COLUMN billing VARCHAR DEFAULT 'known';
-- Calls recorded before without an answer: their cost was never known (recorded then as 0 units).
UPDATE api_calls SET billing = 'unknown' WHERE status IS NULL;
