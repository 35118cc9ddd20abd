-- TaskManual: a finding only a person may decide, recorded once under its
-- idempotent id with its evidence. Returns a row only when new.
-- $1 id, $2 activity, $3 object type, $4 object id, $5 rule, $6 expected
-- version, $7 target, $8 evidence, $9 operator, $10 reason, $11 before, $12 run.
INSERT INTO repair_task (repair_id, activity_id, object_type, object_id, rule_name, expected_version, target_state,
                         status, automatic, evidence, operator, reason, before_state, run_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, 'MANUAL', false, $8, $9, $10, $11, $12)
ON CONFLICT (repair_id) DO NOTHING
RETURNING repair_id;
