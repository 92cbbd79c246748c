-- create.lua: hold a reservation, resetting any earlier one, and replace its alarm.
-- KEYS[1]  the reservation's hash
-- KEYS[2]  its shard's alarm sorted set
-- ARGV[1]  reservation id
-- ARGV[2]  now (ms)
-- ARGV[3]  expiresAt (ms), which is also the alarm's due time
-- Returns  1 when the new alarm is the earliest of its shard (wake the scheduler), else 0.
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'status', 'held', 'createdAt', ARGV[2], 'expiresAt', ARGV[3], 'expirationCount', 0)
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
local head = redis.call('ZRANGE', KEYS[2], 0, 0)
if head[1] == ARGV[1] then
  return 1
end
return 0
