-- OutboxReclaim (design.md#auto-repair): a SENDING event whose lease expired before $2
-- (its relay died mid-send) is made due again; the next relay claims and
-- sends it with the same event id, so a send that did reach the broker is a
-- duplicate the consumers' inboxes answer. $1 event, $2 lease expired before.
UPDATE event_outbox
SET status = 'RETRY', lease_owner = NULL, lease_until = NULL, next_retry_at = clock_timestamp(),
    last_error = 'lease expired: reclaimed by reconcile'
WHERE event_id = $1 AND status = 'SENDING' AND lease_until < $2
RETURNING event_id;
