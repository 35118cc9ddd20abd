-- TimerRearm: a timer that keeps waiting (the backlog guard pauses
-- time-driven actions, or the reservation is frozen) is written again as a
-- new delayed message due at $4 — a copy of the order's original timer
-- (timer_insert.sql) — so a long wait does not use up the group's delivery
-- limit and dead-letter it. The id is derived from the delivered timer's: a
-- duplicate delivery re-arms nothing twice.
-- $1 event id, $2 topic, $3 order, $4 deliver at.
INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, topic, message_key, payload, deliver_at)
SELECT $1, e.aggregate_type, e.aggregate_id, e.event_type, e.schema_version, $2, e.message_key, e.payload, $4
FROM event_outbox AS e
WHERE e.aggregate_id = $3 AND e.event_type = 'ORDER_CANCEL_TIMER'
ORDER BY e.created_at
LIMIT 1
ON CONFLICT (event_id) DO NOTHING;
