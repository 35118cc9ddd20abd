-- project_order_created.lua — apply ORDER_CREATED to the Redis projection,
-- idempotently: counters open_reserved -> committed, once.
--
-- KEYS[1] reservation hash   seckill:{T}:reservation:{reservation_id}
-- KEYS[2] counters hash      seckill:{T}:counter
-- KEYS[3] send_due zset      seckill:{T}:send_due
-- KEYS[4] open zset          seckill:{T}:open
--
-- ARGV[1] reservation_id     ARGV[2] order_id     ARGV[3] now_ms
--
-- Returns {code, reason}
--   1  PROJECTED            status ORDER_CREATED, open_reserved -1, committed +1
--   2  ALREADY_PROJECTED    the projection is already at or past ORDER_CREATED; nothing changed
--  -1  RESERVATION_MISSING  nothing changed: the reconcile job rebuilds it from PostgreSQL
--  -2  RESERVATION_ID_MISMATCH
--  -3  CONFLICT:<status>    e.g. COMPENSATED: a critical anomaly for manual review

if redis.call('EXISTS', KEYS[1]) == 0 then
    return {-1, 'RESERVATION_MISSING'}
end
if redis.call('HGET', KEYS[1], 'reservation_id') ~= ARGV[1] then
    return {-2, 'RESERVATION_ID_MISMATCH'}
end
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'ORDER_CREATED' or status == 'PAID' or status == 'CANCEL_PENDING' or status == 'CANCELLED' then
    return {2, 'ALREADY_PROJECTED'}
end
if status ~= 'RESERVED' then
    return {-3, 'CONFLICT:' .. tostring(status)}
end
redis.call('HSET', KEYS[1], 'status', 'ORDER_CREATED', 'order_id', ARGV[2], 'order_created_at_ms', ARGV[3], 'mq_state', 'PUBLISHED')
redis.call('HINCRBY', KEYS[2], 'open_reserved', -1)
redis.call('HINCRBY', KEYS[2], 'committed', 1)
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
return {1, 'PROJECTED'}
