-- TaskResolve: a person closes a MANUAL task: APPLIED after the approved
-- repair ran, or REJECTED (no action), with the audit fields.
-- $1 id, $2 status, $3 operator, $4 approver, $5 reason, $6 incident, $7 after, $8 via.
UPDATE repair_task
SET status = $2, operator = $3, approver = $4, reason = $5, incident_id = NULLIF($6, ''),
    after_state = $7, applied_via = NULLIF($8, ''), applied_at = clock_timestamp(), updated_at = clock_timestamp()
WHERE repair_id = $1 AND status = 'MANUAL'
RETURNING repair_id;
