-- TimerRearm: a timer that keeps waiting (the backlog guard pauses
-- time-driven actions, or the reservation is frozen) is written again as a
-- new delayed message due at $4, so a long wait does not use up the
-- group's delivery limit and dead-letter it. The id is derived from the
-- delivered timer's: a duplicate delivery re-arms nothing twice.
-- $1 event id, $2 topic, $3 order, $4 deliver at.
INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, topic, message_key, payload, deliver_at)
SELECT $1, 'ORDER', o.order_id, 'ORDER_CANCEL_TIMER', 1, $2, o.order_id::text,
       jsonb_build_object('schema_version', 1, 'event_type', 'ORDER_CANCEL_TIMER', 'order_id', o.order_id,
                          'activity_id', o.activity_id, 'expires_at_ms', floor(extract(epoch FROM o.expires_at) * 1000)::bigint),
       $4
FROM orders AS o
WHERE o.order_id = $3
ON CONFLICT (event_id) DO NOTHING;
