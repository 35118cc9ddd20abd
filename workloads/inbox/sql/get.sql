-- Get: the recorded outcome of a message.
SELECT payload_hash, result_code, order_id
FROM consumer_inbox
WHERE consumer_group = $1 AND message_id = $2;
