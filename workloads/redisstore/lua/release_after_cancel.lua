-- release_after_cancel.lua — apply ORDER_CANCELLED to the Redis projection:
-- the unit becomes sellable again, exactly once.
--
-- KEYS[1] reservation hash   seckill:{T}:reservation:{reservation_id}
-- KEYS[2] available stock    seckill:{T}:stock
-- KEYS[3] counters hash      seckill:{T}:counter
-- KEYS[4] send_due zset      seckill:{T}:send_due
-- KEYS[5] open zset          seckill:{T}:open
--
-- ARGV[1] reservation_id     ARGV[2] order_id     ARGV[3] now_ms     ARGV[4] terminal_ttl_ms
--
-- Returns {code, reason}
--   1  RELEASED              from ORDER_CREATED: committed -1, available +1
--                            from RESERVED (the ORDER_CREATED projection has not arrived yet):
--                            open_reserved -1, available +1; the late projection then finds CANCELLED
--   2  ALREADY_RELEASED      nothing changed
--  -1  RESERVATION_MISSING   nothing changed: reconcile
--  -2  RESERVATION_ID_MISMATCH
--  -3  CONFLICT:<status>     e.g. COMPENSATED or PAID: manual review

if redis.call('EXISTS', KEYS[1]) == 0 then
    return {-1, 'RESERVATION_MISSING'}
end
if redis.call('HGET', KEYS[1], 'reservation_id') ~= ARGV[1] then
    return {-2, 'RESERVATION_ID_MISMATCH'}
end
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'CANCELLED' then
    return {2, 'ALREADY_RELEASED'}
end
if status == 'ORDER_CREATED' or status == 'CANCEL_PENDING' then
    redis.call('HINCRBY', KEYS[3], 'committed', -1)
elseif status == 'RESERVED' then
    redis.call('HINCRBY', KEYS[3], 'open_reserved', -1)
else
    return {-3, 'CONFLICT:' .. tostring(status)}
end
redis.call('INCRBY', KEYS[2], 1)
redis.call('HSET', KEYS[1], 'status', 'CANCELLED', 'order_id', ARGV[2], 'cancelled_at_ms', ARGV[3])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[4]))
return {1, 'RELEASED'}
