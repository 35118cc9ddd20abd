-- compensate.lua — conditional, idempotent stock restore (design.md#compensation).
--
-- KEYS[1] reservation hash   seckill:{T}:reservation:{reservation_id}
-- KEYS[2] available stock    seckill:{T}:stock
-- KEYS[3] compensation mark  seckill:{T}:comp:{reservation_id}
-- KEYS[4] counters hash      seckill:{T}:counter
-- KEYS[5] send_due zset      seckill:{T}:send_due   (the entry is removed: nothing left to send)
-- KEYS[6] open zset          seckill:{T}:open       (the reservation is decided)
--
-- ARGV[1] reservation_id     ARGV[2] compensation_id
-- ARGV[3] now_ms             ARGV[4] terminal_ttl_ms
--
-- Returns {code, reason}
--   1  COMPENSATED               stock +1, open_reserved -1, marker set, this call did it
--   2  ALREADY_COMPENSATED       idempotent success, nothing changed
--  -1  RESERVATION_MISSING       never a blind INCR: reconcile or manual review
--  -2  RESERVATION_ID_MISMATCH
--  -3  ORDER_ALREADY_EXISTS      the reservation has an order: never compensated
--  -4  INVALID_STATUS:<status>
--  -5  COMPENSATION_ID_CONFLICT  another compensation id already applied: manual check

if redis.call('EXISTS', KEYS[1]) == 0 then
    return {-1, 'RESERVATION_MISSING'}
end
if redis.call('HGET', KEYS[1], 'reservation_id') ~= ARGV[1] then
    return {-2, 'RESERVATION_ID_MISMATCH'}
end

local marker = redis.call('GET', KEYS[3])
if marker then
    if marker == ARGV[2] then
        return {2, 'ALREADY_COMPENSATED'}
    end
    return {-5, 'COMPENSATION_ID_CONFLICT'}
end

local status = redis.call('HGET', KEYS[1], 'status')
if status == 'COMPENSATED' then
    return {2, 'ALREADY_COMPENSATED'}
end
if status == 'ORDER_CREATED' or status == 'PAID' or status == 'CANCEL_PENDING' or status == 'CANCELLED' then
    return {-3, 'ORDER_ALREADY_EXISTS'}
end
if status ~= 'RESERVED' and status ~= 'ORDER_REJECTED' and status ~= 'COMPENSATING' then
    return {-4, 'INVALID_STATUS:' .. tostring(status)}
end

redis.call('INCRBY', KEYS[2], 1)
local open = tonumber(redis.call('HGET', KEYS[4], 'open_reserved') or '0')
if open > 0 then
    redis.call('HINCRBY', KEYS[4], 'open_reserved', -1)
end
redis.call('HSET', KEYS[1], 'status', 'COMPENSATED', 'compensation_id', ARGV[2], 'compensated_at_ms', ARGV[3])
redis.call('SET', KEYS[3], ARGV[2])
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('ZREM', KEYS[6], ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[4]))
redis.call('PEXPIRE', KEYS[3], tonumber(ARGV[4]))
return {1, 'COMPENSATED'}
