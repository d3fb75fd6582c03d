-- Calls and units per month and endpoint (see the view units_by_month).
SELECT month, endpoint, calls, units, failed_calls, no_data_calls FROM units_by_month ORDER BY month, units DESC, endpoint;
