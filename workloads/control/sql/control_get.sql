-- ControlGet: the activity's control row (zero rows: never set).
-- $1 activity.
SELECT window_state, business_deadline_ms, payment_window_ms, generation, compensation_paused, coalesce(pause_reason, ''), updated_at
FROM activity_control
WHERE activity_id = $1;
