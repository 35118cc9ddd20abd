-- rebuild_projection.lua — recreate a lost reservation hash from
-- PostgreSQL's order (design.md#auto-repair "PG has the order, Redis still queued":
-- rebuild the projection, never touch stock). Only when the hash is gone:
-- an existing hash goes through project_order_created.lua instead.
--
-- KEYS[1] reservation hash   seckill:{T}:reservation:{reservation_id}
-- KEYS[2] user mark          seckill:{T}:user:{user_id}
-- KEYS[3] send_due zset      seckill:{T}:send_due
-- KEYS[4] open zset          seckill:{T}:open
--
-- ARGV[1] reservation_id     ARGV[2] message_id       ARGV[3] request_id
-- ARGV[4] activity_id        ARGV[5] sku_id           ARGV[6] user_id
-- ARGV[7] bucket             ARGV[8] order_id         ARGV[9] now_ms
-- ARGV[10] reserved_at_ms    ARGV[11] business_deadline_ms
--
-- Returns {code, reason}
--   1  REBUILT               hash written with the order; counters and stock unchanged
--   2  EXISTS:<status>       nothing changed

if redis.call('EXISTS', KEYS[1]) == 1 then
    return {2, 'EXISTS:' .. tostring(redis.call('HGET', KEYS[1], 'status'))}
end
redis.call('HSET', KEYS[1],
    'status', 'ORDER_CREATED',
    'mq_state', 'PUBLISHED',
    'reservation_id', ARGV[1],
    'message_id', ARGV[2],
    'request_id', ARGV[3],
    'activity_id', ARGV[4],
    'sku_id', ARGV[5],
    'user_id', ARGV[6],
    'bucket', ARGV[7],
    'order_id', ARGV[8],
    'reserved_at_ms', ARGV[10],
    'business_deadline_ms', ARGV[11],
    'rebuilt_at_ms', ARGV[9],
    'rebuilt_by', 'reconcile')
-- The user holds an order: the one-per-user mark stands again.
redis.call('SET', KEYS[2], ARGV[1], 'NX')
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
return {1, 'REBUILT'}
