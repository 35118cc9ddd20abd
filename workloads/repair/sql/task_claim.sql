-- TaskClaim (design.md#runbook step 4): insert the repair task under its
-- idempotent id and lease it to the caller, or take over a PENDING one whose
-- lease is gone (an earlier attempt failed or its process died). A task that
-- is APPLIED, MANUAL, REJECTED or leased now returns no row: nobody applies
-- it twice.
-- $1 id, $2 activity, $3 object type, $4 object id, $5 rule, $6 expected
-- version, $7 target, $8 automatic, $9 evidence, $10 operator, $11 approver,
-- $12 reason, $13 incident, $14 before, $15 run, $16 lease.
INSERT INTO repair_task (repair_id, activity_id, object_type, object_id, rule_name, expected_version, target_state,
                         status, automatic, evidence, operator, approver, reason, incident_id, before_state, run_id,
                         attempt_count, lease_until)
VALUES ($1, $2, $3, $4, $5, $6, $7, 'PENDING', $8, $9, $10, $11, $12, $13, $14, $15, 1,
        clock_timestamp() + $16::interval)
ON CONFLICT (repair_id) DO UPDATE
SET attempt_count = repair_task.attempt_count + 1,
    lease_until   = clock_timestamp() + $16::interval,
    run_id        = EXCLUDED.run_id,
    evidence      = EXCLUDED.evidence,
    before_state  = EXCLUDED.before_state,
    updated_at    = clock_timestamp()
WHERE repair_task.status = 'PENDING'
  AND (repair_task.lease_until IS NULL OR repair_task.lease_until < clock_timestamp())
RETURNING attempt_count;
