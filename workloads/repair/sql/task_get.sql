-- TaskGet: one repair task. $1 id.
SELECT repair_id, COALESCE(activity_id, 0), object_type, object_id, rule_name, expected_version, target_state, status,
       automatic, evidence, operator, COALESCE(approver, ''), reason, COALESCE(incident_id, ''),
       COALESCE(before_state, 'null'::jsonb), COALESCE(after_state, 'null'::jsonb), COALESCE(applied_via, ''),
       COALESCE(last_error, ''), attempt_count, created_at, updated_at
FROM repair_task WHERE repair_id = $1;
