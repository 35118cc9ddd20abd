-- ControlGet: whether deadline-based rejection is paused for the activity.
SELECT compensation_paused FROM activity_control WHERE activity_id = $1;
