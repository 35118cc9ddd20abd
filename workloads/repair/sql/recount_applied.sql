-- RecountApplied: was an activity-level recount of the SKU applied after
-- the compensation task gave up (so the recount saw the lost key's unit)?
-- $1 activity, $2 SKU object id, $3 compensation task.
SELECT EXISTS (
    SELECT 1
    FROM repair_task AS rt
    JOIN compensation_task AS t ON t.task_id = $3
    WHERE rt.activity_id = $1 AND rt.object_type = 'SKU' AND rt.object_id = $2
      AND rt.rule_name = 'REDIS_RECOUNT' AND rt.status = 'APPLIED' AND rt.applied_at > t.updated_at);
