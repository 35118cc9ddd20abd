-- TaskDone: the leased repair applied, with the state after it and the
-- standard step that did it. $1 id, $2 after, $3 via.
UPDATE repair_task
SET status = 'APPLIED', after_state = $2, applied_via = $3, applied_at = clock_timestamp(),
    lease_until = NULL, last_error = NULL, updated_at = clock_timestamp()
WHERE repair_id = $1 AND status = 'PENDING';
