-- CompensationPaused: the backlog guard's flag (false when the activity has
-- no control row). $1 activity.
SELECT COALESCE((SELECT compensation_paused FROM activity_control WHERE activity_id = $1), false);
