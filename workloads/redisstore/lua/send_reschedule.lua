-- send_reschedule.lua — a send failed (PENDING) or its outcome is unknown
-- (UNKNOWN): keep the entry, due again at next_ms, with the same message id.
--
-- KEYS[1] send_due zset      seckill:{T}:send_due
-- KEYS[2] reservation hash   seckill:{T}:reservation:{reservation_id}
--
-- ARGV[1] reservation_id     ARGV[2] owned_score     ARGV[3] next_ms
-- ARGV[4] mq_state (PENDING | UNKNOWN)                ARGV[5] last_error
--
-- Returns {code, reason}
--   1  RESCHEDULED
--   2  LEASE_LOST          another scanner owns the entry; nothing changed
--   3  NOT_DUE             the entry is gone; nothing changed
--  -1  RESERVATION_MISSING
--  -2  INVALID_MQ_STATE

if ARGV[4] ~= 'PENDING' and ARGV[4] ~= 'UNKNOWN' then
    return {-2, 'INVALID_MQ_STATE'}
end
if redis.call('EXISTS', KEYS[2]) == 0 then
    return {-1, 'RESERVATION_MISSING'}
end
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then
    return {3, 'NOT_DUE'}
end
if tonumber(score) ~= tonumber(ARGV[2]) then
    return {2, 'LEASE_LOST'}
end
redis.call('ZADD', KEYS[1], 'XX', tonumber(ARGV[3]), ARGV[1])
redis.call('HINCRBY', KEYS[2], 'send_attempts', 1)
-- PUBLISHED is never downgraded: one success is enough.
if redis.call('HGET', KEYS[2], 'mq_state') ~= 'PUBLISHED' then
    redis.call('HSET', KEYS[2], 'mq_state', ARGV[4])
end
redis.call('HSET', KEYS[2], 'last_error', ARGV[5])
return {1, 'RESCHEDULED'}
