-- OutboxInsert: the event, in the business transaction (design.md#outbox);
-- $7 the traceparent of the step that decided it (design.md#traces; ''
-- untraced), the parent of the relay's send.
INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, topic, message_key, payload, traceparent)
VALUES ($1, $2, $3::uuid, $4, 1, $5, $3::uuid::text, $6::jsonb, NULLIF($7::text, ''))
ON CONFLICT (event_id) DO NOTHING;
