-- send_ack.lua — a send of the order-create message succeeded.
--
-- The broker's acknowledgement says the message is stored, not that it will
-- be consumed: a consumer that dies with a long poll in flight can take a
-- message away for minutes. So with resend_after_ms > 0 the entry is kept,
-- due again at now + resend_after_ms × 2^(sends - 1) (at most 64 ×): if
-- PostgreSQL has not decided the reservation by then (its projection removes
-- the entry), the scanner sends it again with the same message id, and the
-- consumer's inbox makes the copies one. 0 removes the entry at once.
--
-- KEYS[1] send_due zset      seckill:{T}:send_due
-- KEYS[2] reservation hash   seckill:{T}:reservation:{reservation_id}
--
-- ARGV[1] reservation_id     ARGV[2] owned_score (the lease expiry, or the first due time for the gateway's own send)
-- ARGV[3] now_ms             ARGV[4] resend_after_ms (0: nothing to verify)
--
-- Returns {code, reason}
--   1  ACKED        entry removed (or due again for the verification), mq_state PUBLISHED
--   2  LEASE_LOST   another scanner holds the entry now (it will resend: the consumer's inbox
--                   removes the duplicate); mq_state PUBLISHED is still recorded
--   3  NOT_DUE      the entry was already gone (acked before, or the reservation ended)
--  -1  RESERVATION_MISSING

if redis.call('EXISTS', KEYS[2]) == 0 then
    return {-1, 'RESERVATION_MISSING'}
end
local sends = redis.call('HINCRBY', KEYS[2], 'send_attempts', 1)
redis.call('HSET', KEYS[2], 'mq_state', 'PUBLISHED', 'published_at_ms', ARGV[3], 'last_error', '')
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then
    return {3, 'NOT_DUE'}
end
if tonumber(score) ~= tonumber(ARGV[2]) then
    return {2, 'LEASE_LOST'}
end
local after = tonumber(ARGV[4]) or 0
if after > 0 then
    local factor = 2 ^ math.min(math.max(sends - 1, 0), 6)
    redis.call('ZADD', KEYS[1], 'XX', tonumber(ARGV[3]) + after * factor, ARGV[1])
else
    redis.call('ZREM', KEYS[1], ARGV[1])
end
return {1, 'ACKED'}
