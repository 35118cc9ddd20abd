-- send_claim.lua — the send-scanner's leased claim of due send_due entries.
-- Never ZPOPMIN-then-send: the entry stays, its score becomes the lease's
-- expiry, so a scanner that dies after claiming is replaced when the lease ends.
--
-- KEYS[1] send_due zset      seckill:{T}:send_due
--
-- ARGV[1] now_ms             ARGV[2] lease_until_ms (> now_ms)     ARGV[3] limit
--
-- Returns a flat list {reservation_id, previous_score, ...} of the entries now
-- leased until lease_until_ms. The caller acks or reschedules each with
-- lease_until_ms as its proof of ownership.

local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[3]))
for i = 1, #due, 2 do
    redis.call('ZADD', KEYS[1], 'XX', tonumber(ARGV[2]), due[i])
end
return due
