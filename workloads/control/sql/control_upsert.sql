-- ControlUpsert: the activity's window state and durations as the operator
-- sets them; compensation_paused is the backlog guard's and is left alone.
-- $1 activity, $2 window, $3 business deadline ms, $4 payment window ms, $5 generation.
INSERT INTO activity_control (activity_id, window_state, business_deadline_ms, payment_window_ms, generation)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (activity_id) DO UPDATE
SET window_state = EXCLUDED.window_state,
    business_deadline_ms = EXCLUDED.business_deadline_ms,
    payment_window_ms = EXCLUDED.payment_window_ms,
    generation = EXCLUDED.generation,
    updated_at = clock_timestamp()
WHERE (activity_control.window_state, activity_control.business_deadline_ms, activity_control.payment_window_ms, activity_control.generation)
      IS DISTINCT FROM (EXCLUDED.window_state, EXCLUDED.business_deadline_ms, EXCLUDED.payment_window_ms, EXCLUDED.generation);
