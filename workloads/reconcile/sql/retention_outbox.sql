-- RetentionOutbox: deletes at most $3 of the activity's outbox events sent
-- before $2, so that the table the relay scans stays the size of what is in
-- flight. Kept: events not yet sent (PENDING, SENDING, RETRY, MANUAL) and an
-- order's cancel timer while the order is open (a re-armed timer copies it,
-- timer_rearm.sql). $1 activity, $2 sent before, $3 limit.
DELETE FROM event_outbox
WHERE event_id IN (
    SELECT e.event_id
    FROM event_outbox AS e
    WHERE e.status = 'SENT' AND e.sent_at < $2
      AND (e.payload ->> 'activity_id')::bigint = $1
      AND NOT (e.event_type = 'ORDER_CANCEL_TIMER' AND EXISTS (
          SELECT 1 FROM orders AS o
          WHERE o.order_id = e.aggregate_id AND o.status IN ('CREATED', 'PAYING', 'CANCEL_PENDING')))
    LIMIT $3);
