-- TaskList: the repair tasks of an activity in the given statuses (all
-- activities when $1 is 0), oldest first. $1 activity, $2 statuses, $3 limit.
SELECT repair_id, COALESCE(activity_id, 0), object_type, object_id, rule_name, expected_version, target_state, status,
       automatic, evidence, operator, COALESCE(approver, ''), reason, COALESCE(incident_id, ''),
       COALESCE(before_state, 'null'::jsonb), COALESCE(after_state, 'null'::jsonb), COALESCE(applied_via, ''),
       COALESCE(last_error, ''), attempt_count, created_at, updated_at
FROM repair_task
WHERE ($1::bigint = 0 OR activity_id = $1) AND status = ANY($2)
ORDER BY created_at
LIMIT $3;
