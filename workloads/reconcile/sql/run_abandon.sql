-- RunAbandon: a run still RUNNING long after it started died with its
-- process; it is closed as FAILED so the next run may start.
-- $1 activity, $2 how old counts as abandoned.
UPDATE reconcile_run
SET status = 'FAILED', finished_at = clock_timestamp(),
    summary = summary || '{"error": "abandoned: still running after the time limit"}'::jsonb
WHERE activity_id = $1 AND status = 'RUNNING' AND started_at < clock_timestamp() - $2::interval;
