-- TimerInsert (seed §7.6): the order's timeout-cancel timer, a delayed
-- message due at expires_at, written with the order through the outbox.
-- $1 event id, $2 topic, $3 order.
INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, topic, message_key, payload, deliver_at)
SELECT $1, 'ORDER', o.order_id, 'ORDER_CANCEL_TIMER', 1, $2, o.order_id::text,
       jsonb_build_object('schema_version', 1, 'event_type', 'ORDER_CANCEL_TIMER', 'order_id', o.order_id,
                          'activity_id', o.activity_id, 'expires_at_ms', floor(extract(epoch FROM o.expires_at) * 1000)::bigint),
       o.expires_at
FROM orders AS o
WHERE o.order_id = $3;
