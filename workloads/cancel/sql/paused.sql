-- Paused: whether the backlog guard has paused deadline decisions.
SELECT COALESCE((SELECT compensation_paused FROM activity_control WHERE activity_id = $1), false);
