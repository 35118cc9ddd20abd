-- RetentionInbox: deletes at most $3 of the activity's finished inbox rows
-- processed before $2. An inbox row answers a duplicate delivery; past the
-- broker's message retention no delivery of it can come, and the business
-- keys (one order per reservation, one per user) still refuse a duplicate.
-- Kept: rows still PROCESSING, rows of no reservation, quarantined messages
-- (another table). $1 activity, $2 processed before, $3 limit.
DELETE FROM consumer_inbox
WHERE (consumer_group, message_id) IN (
    SELECT i.consumer_group, i.message_id
    FROM consumer_inbox AS i
    JOIN inventory_reservation AS r ON r.reservation_id = i.reservation_id
    WHERE r.activity_id = $1 AND i.processed_at < $2 AND i.result_code <> 'PROCESSING'
    LIMIT $3);
