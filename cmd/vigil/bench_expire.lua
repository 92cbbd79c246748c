-- bench_expire.lua: the benchmark's alarm transition, shaped like a reservation expiry:
-- held -> expired only while the object is held and its expiresAt has passed, so a replayed
-- alarm changes nothing and expirationCount never passes 1.
-- KEYS[1]  the object's hash (under its alarm shard's hash tag)
-- ARGV[1]  now (ms)
-- Returns  1 when it expired the object, 0 when the guard did not hold.
local s = redis.call('HMGET', KEYS[1], 'status', 'expiresAt')
if s[1] == 'held' and tonumber(s[2]) <= tonumber(ARGV[1]) then
  redis.call('HSET', KEYS[1], 'status', 'expired', 'expiredAt', ARGV[1])
  redis.call('HINCRBY', KEYS[1], 'expirationCount', 1)
  return 1
end
return 0
