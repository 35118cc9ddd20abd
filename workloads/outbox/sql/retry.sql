-- OutboxMarkRetry: a failed or unknown send is retried after a backoff; past
-- the attempt cap it becomes MANUAL (kept with its last error, never dropped).
-- $1 event, $2 lease owner, $3 backoff, $4 last error, $5 max attempts.
UPDATE event_outbox
SET status        = CASE WHEN attempt_count >= $5 THEN 'MANUAL' ELSE 'RETRY' END,
    next_retry_at = clock_timestamp() + $3::interval,
    lease_owner   = NULL,
    lease_until   = NULL,
    last_error    = $4
WHERE event_id = $1 AND status = 'SENDING' AND lease_owner = $2
RETURNING status;
