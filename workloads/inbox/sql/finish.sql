-- Finish: record the message's business outcome in the same transaction.
UPDATE consumer_inbox
SET result_code = $3, order_id = $4, processed_at = clock_timestamp()
WHERE consumer_group = $1 AND message_id = $2 AND result_code = 'PROCESSING';
