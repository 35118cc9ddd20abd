-- ProjectionInbox: record that a consumer group applied an event (its own
-- inbox; the Redis script itself is idempotent too).
INSERT INTO consumer_inbox (consumer_group, message_id, topic, event_type, reservation_id, payload_hash, result_code)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (consumer_group, message_id) DO NOTHING;
