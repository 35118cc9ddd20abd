-- Quarantine: keep a message that cannot be processed safely, with its
-- evidence, once per broker message.
INSERT INTO message_quarantine (quarantine_id, consumer_group, topic, broker_message_id, message_id, reason_code, detail, payload, payload_hash)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (consumer_group, broker_message_id) DO NOTHING;
