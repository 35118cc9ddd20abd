-- OutboxInsert: the event, in the business transaction (design.md#outbox).
INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, topic, message_key, payload)
VALUES ($1, $2, $3::uuid, $4, 1, $5, $3::uuid::text, $6::jsonb)
ON CONFLICT (event_id) DO NOTHING;
