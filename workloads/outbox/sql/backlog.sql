-- OutboxBacklog (design.md#metrics outbox_pending, outbox_oldest_age_seconds):
-- events not yet sent, and the age of the oldest.
SELECT count(*),
       COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min(created_at)), 0)::float8
FROM event_outbox
WHERE status IN ('PENDING', 'RETRY', 'SENDING');
