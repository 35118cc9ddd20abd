-- OutboxMarkSentMany: a relay's sent events of one batch in one statement;
-- only the current lease owner finishes an event. $1 event ids, $2 owner.
UPDATE event_outbox
SET status = 'SENT', sent_at = clock_timestamp(), lease_owner = NULL, lease_until = NULL, last_error = NULL
WHERE event_id = ANY($1::uuid[]) AND status = 'SENDING' AND lease_owner = $2;
