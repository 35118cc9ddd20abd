-- OutboxMarkSent: only the current lease owner finishes the event.
UPDATE event_outbox
SET status = 'SENT', sent_at = clock_timestamp(), lease_owner = NULL, lease_until = NULL, last_error = NULL
WHERE event_id = $1 AND status = 'SENDING' AND lease_owner = $2;
