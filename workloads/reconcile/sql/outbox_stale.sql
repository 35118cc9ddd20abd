-- OutboxStale: the activity's outbox events that need the reconcile job:
-- SENDING with a lease expired before the watermark (automatic reclaim) and
-- MANUAL ones (a person). $1 activity, $2 watermark, $3 limit.
SELECT event_id, event_type, status, attempt_count, COALESCE(lease_owner, ''), lease_until, COALESCE(last_error, ''), created_at
FROM event_outbox
WHERE (payload ->> 'activity_id')::bigint = $1
  AND ((status = 'SENDING' AND lease_until < $2) OR status = 'MANUAL')
ORDER BY created_at
LIMIT $3;
