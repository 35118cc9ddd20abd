-- CompensationBacklog (design.md#metrics compensation_pending,
-- compensation_oldest_age_seconds): tasks not yet applied, and the oldest's age.
SELECT count(*),
       COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min(created_at)), 0)::float8
FROM compensation_task
WHERE status IN ('PENDING', 'RETRY', 'CLAIMED');
