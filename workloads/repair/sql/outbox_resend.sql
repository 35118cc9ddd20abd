-- OutboxResend: an approved resend of a MANUAL outbox event: due again with
-- a fresh attempt budget, same event id (the consumers' inboxes answer a
-- duplicate). $1 event.
UPDATE event_outbox
SET status = 'RETRY', attempt_count = 0, next_retry_at = clock_timestamp(), lease_owner = NULL, lease_until = NULL,
    last_error = 'resent after manual review'
WHERE event_id = $1 AND status = 'MANUAL'
RETURNING event_id;
