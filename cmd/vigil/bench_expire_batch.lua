-- bench_expire_batch.lua: bench_expire.lua for a whole batch in one call. Every object of a
-- batch lives in the same alarm shard, so all its keys share one hash tag and one script may
-- touch them all, on one Redis or on a Redis Cluster.
-- KEYS[1..n] the objects' hashes
-- ARGV[1]    now (ms)
-- Returns    one 1 (expired it) or 0 (the guard did not hold) per key, in order.
local now = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS do
  local s = redis.call('HMGET', KEYS[i], 'status', 'expiresAt')
  if s[1] == 'held' and tonumber(s[2]) <= now then
    redis.call('HSET', KEYS[i], 'status', 'expired', 'expiredAt', ARGV[1])
    redis.call('HINCRBY', KEYS[i], 'expirationCount', 1)
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
