-- The roster's VINs (`plan_unsettled_vins`) whose campaign details are due now, from the recall checks landed
-- (recall_details_waiting): the refresh looks them up whatever its batch finds (tasks/plan/due.py).
SELECT w.vin FROM recall_details_waiting() AS w SEMI JOIN plan_unsettled_vins AS r ON r.vin = w.vin ORDER BY w.vin;
