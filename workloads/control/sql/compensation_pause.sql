-- CompensationPause: the backlog guard's flag (design.md#backlog step 6), which the
-- compensator's and the consumer's deadline-based rejections obey. Returns
-- a row only when the flag changed. $1 activity, $2 paused, $3 reason.
INSERT INTO activity_control (activity_id, compensation_paused, pause_reason)
VALUES ($1, $2, $3)
ON CONFLICT (activity_id) DO UPDATE
SET compensation_paused = EXCLUDED.compensation_paused,
    pause_reason = EXCLUDED.pause_reason,
    updated_at = clock_timestamp()
WHERE activity_control.compensation_paused IS DISTINCT FROM EXCLUDED.compensation_paused
RETURNING activity_id;
