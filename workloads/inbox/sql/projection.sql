-- Projection: record that a consumer group applied events (its own
-- inbox; the Redis scripts themselves are idempotent too) — a received batch
-- in one statement, one row per element of the arrays ($2..$7, equal lengths).
INSERT INTO consumer_inbox (consumer_group, message_id, topic, event_type, reservation_id, payload_hash, result_code)
SELECT $1, e.message_id, e.topic, e.event_type, e.reservation_id, e.payload_hash, e.result_code
FROM unnest($2::uuid[], $3::text[], $4::text[], $5::uuid[], $6::bytea[], $7::text[])
     AS e(message_id, topic, event_type, reservation_id, payload_hash, result_code)
ON CONFLICT (consumer_group, message_id) DO NOTHING;
