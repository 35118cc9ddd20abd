-- move_out.lua — first half of a stock move between two buckets of a SKU:
-- take units out of this (source) bucket and record the move as pending, in
-- the same atomic step. The destination applies it with move_in.lua (once,
-- by id); whoever finishes a move — the mover, or a settle pass after a
-- crash — then deletes the pending entry. While a move is pending its units
-- are "in transit": for the SKU, sum(moved_out) - sum(moved_in).
--
-- Per bucket, at every moment:
--   initial + moved_in - moved_out = available + open_reserved + committed
--
-- KEYS[1] available stock    seckill:{T}:stock
-- KEYS[2] counters hash      seckill:{T}:counter      moved_out += amount
-- KEYS[3] pending moves      seckill:{T}:moves_out    move_id -> "dst_bucket:amount:at_ms"
--
-- ARGV[1] move_id            ARGV[2] destination bucket
-- ARGV[3] max amount (>= 1)  ARGV[4] now_ms
--
-- The amount is half the bucket's available stock, rounded up, at most
-- ARGV[3]: a bucket that lends keeps stock for its own buyers.
--
-- Returns {code, reason, amount}
--   1  MOVED_OUT          available -= amount, moved_out += amount, pending entry written
--   2  ALREADY_MOVED_OUT  this move id is pending already: its amount, nothing changed
--  -1  EMPTY              nothing to lend; nothing written
--  -2  INVALID_ARGUMENT
--  -4  NOT_PROVISIONED    no stock key: never treated as stock

local max = tonumber(ARGV[3])
if ARGV[1] == '' or not tonumber(ARGV[2]) or not max or max < 1 then
    return {-2, 'INVALID_ARGUMENT', 0}
end
local pending = redis.call('HGET', KEYS[3], ARGV[1])
if pending then
    local amount = tonumber(string.match(pending, '^[^:]*:([^:]*):'))
    return {2, 'ALREADY_MOVED_OUT', amount or 0}
end
local stock = redis.call('GET', KEYS[1])
if not stock then
    return {-4, 'NOT_PROVISIONED', 0}
end
stock = tonumber(stock)
if stock <= 0 then
    return {-1, 'EMPTY', 0}
end
local amount = math.min(max, math.floor((stock + 1) / 2))
redis.call('DECRBY', KEYS[1], amount)
redis.call('HINCRBY', KEYS[2], 'moved_out', amount)
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2] .. ':' .. amount .. ':' .. ARGV[4])
return {1, 'MOVED_OUT', amount}
