-- send_ack.lua — a send of the order-create message succeeded.
--
-- KEYS[1] send_due zset      seckill:{T}:send_due
-- KEYS[2] reservation hash   seckill:{T}:reservation:{reservation_id}
--
-- ARGV[1] reservation_id     ARGV[2] owned_score (the lease expiry, or the first due time for the gateway's own send)
-- ARGV[3] now_ms
--
-- Returns {code, reason}
--   1  ACKED        entry removed, mq_state PUBLISHED
--   2  LEASE_LOST   another scanner holds the entry now (it will resend: the consumer's inbox
--                   removes the duplicate); mq_state PUBLISHED is still recorded
--   3  NOT_DUE      the entry was already gone (acked before, or the reservation ended)
--  -1  RESERVATION_MISSING

if redis.call('EXISTS', KEYS[2]) == 0 then
    return {-1, 'RESERVATION_MISSING'}
end
redis.call('HINCRBY', KEYS[2], 'send_attempts', 1)
redis.call('HSET', KEYS[2], 'mq_state', 'PUBLISHED', 'published_at_ms', ARGV[3], 'last_error', '')
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then
    return {3, 'NOT_DUE'}
end
if tonumber(score) ~= tonumber(ARGV[2]) then
    return {2, 'LEASE_LOST'}
end
redis.call('ZREM', KEYS[1], ARGV[1])
return {1, 'ACKED'}
