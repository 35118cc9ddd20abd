-- Claim: claim the message for this consumer group (design.md#inbox).
-- One row: this transaction owns the message. Zero rows: another transaction
-- processed it (or is processing it: the unique index waits for it).
INSERT INTO consumer_inbox (consumer_group, message_id, topic, event_type, reservation_id, request_id, payload_hash, result_code)
VALUES ($1, $2, $3, $4, $5, $6, $7, 'PROCESSING')
ON CONFLICT (consumer_group, message_id) DO NOTHING
RETURNING message_id;
