-- OutboxClaimBatch (design.md#outbox): lease due events in a short transaction, so
-- the broker call happens outside any database transaction. SKIP LOCKED lets
-- several relays claim side by side; an expired SENDING lease is reclaimed
-- (lease_expired: its relay died or stalled between claim and mark).
-- The status test is idx_event_outbox_dispatch's predicate as written, so
-- the claim is an ordered scan of that index that stops at $1 rows (not a
-- bitmap of every entry, dead ones included: 18 ms per claim after a sale).
-- $1 limit, $2 lease owner, $3 lease duration, $4 now (NULL: the
-- database's clock; tests pass a later one instead of sleeping).
WITH candidates AS (
    SELECT event_id, status = 'SENDING' AS lease_expired
    FROM event_outbox
    WHERE status IN ('PENDING', 'RETRY', 'SENDING')
      AND (status IN ('PENDING', 'RETRY') OR lease_until < coalesce($4::timestamptz, clock_timestamp()))
      AND next_retry_at <= coalesce($4::timestamptz, clock_timestamp())
    ORDER BY next_retry_at, created_at
    FOR UPDATE SKIP LOCKED
    LIMIT $1
)
UPDATE event_outbox AS o
SET status        = 'SENDING',
    lease_owner   = $2,
    lease_until   = coalesce($4::timestamptz, clock_timestamp()) + $3::interval,
    attempt_count = attempt_count + 1
FROM candidates AS c
WHERE o.event_id = c.event_id
RETURNING o.event_id, o.aggregate_type, o.aggregate_id, o.event_type, o.schema_version, o.topic,
          o.message_key, o.payload, o.deliver_at, o.attempt_count, c.lease_expired, coalesce(o.traceparent, '');
