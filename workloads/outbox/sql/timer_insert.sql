-- TimerInsert (design.md#payment-cancel): the order's timeout-cancel timer, a delayed
-- message due at expires_at, written with the order through the outbox.
-- The payload is events.CancelTimer; the order row gives the due time.
-- $1 event id, $2 topic, $3 order, $4 payload, $5 traceparent ('' untraced).
INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, topic, message_key, payload, deliver_at,
                          traceparent)
SELECT $1, 'ORDER', o.order_id, 'ORDER_CANCEL_TIMER', 1, $2, o.order_id::text, $4::jsonb, o.expires_at, NULLIF($5::text, '')
FROM orders AS o
WHERE o.order_id = $3;
