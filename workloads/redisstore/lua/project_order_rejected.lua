-- project_order_rejected.lua — apply ORDER_REJECTED to the Redis projection,
-- idempotently: the reservation hash shows PostgreSQL's refusal and its
-- reason (GET answers ORDER_REJECTED) until the compensator gives the unit
-- back (compensate.lua takes ORDER_REJECTED to COMPENSATED). Stock and
-- counters are untouched: the unit stays open_reserved until compensated.
-- No more sending: PostgreSQL has decided.
--
-- KEYS[1] reservation hash   seckill:{T}:reservation:{reservation_id}
-- KEYS[2] send_due zset      seckill:{T}:send_due
--
-- ARGV[1] reservation_id     ARGV[2] reason_code     ARGV[3] now_ms
--
-- Returns {code, reason}
--   1  PROJECTED            status ORDER_REJECTED with reason_code
--   2  ALREADY_PROJECTED    already ORDER_REJECTED, COMPENSATING or COMPENSATED; nothing changed
--  -1  RESERVATION_MISSING  nothing changed (the compensator and the reconcile job handle a lost hash)
--  -2  RESERVATION_ID_MISMATCH
--  -3  CONFLICT:<status>    e.g. ORDER_CREATED: a critical anomaly for manual review

if redis.call('EXISTS', KEYS[1]) == 0 then
    return {-1, 'RESERVATION_MISSING'}
end
if redis.call('HGET', KEYS[1], 'reservation_id') ~= ARGV[1] then
    return {-2, 'RESERVATION_ID_MISMATCH'}
end
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'ORDER_REJECTED' or status == 'COMPENSATING' or status == 'COMPENSATED' then
    return {2, 'ALREADY_PROJECTED'}
end
if status ~= 'RESERVED' then
    return {-3, 'CONFLICT:' .. tostring(status)}
end
redis.call('HSET', KEYS[1], 'status', 'ORDER_REJECTED', 'reason_code', ARGV[2], 'rejected_at_ms', ARGV[3])
redis.call('ZREM', KEYS[2], ARGV[1])
return {1, 'PROJECTED'}
