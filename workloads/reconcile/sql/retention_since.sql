-- RetentionSince: when the activity was provisioned (its first SKU row), or
-- NULL when it is not. Nothing of an activity — a reservation, an inbox row,
-- an outbox event — is older, so a retention cutoff before it has nothing
-- to delete, and the purge skips its statements, which scan their tables
-- (retention_outbox.sql, retention_inbox.sql), while a sale is younger than
-- its retention. $1 activity.
SELECT min(created_at) FROM sku_inventory WHERE activity_id = $1;
