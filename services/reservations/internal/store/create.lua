-- create.lua: hold a reservation, resetting any earlier one, and replace its alarm.
-- KEYS[1]  the reservation's hash
-- KEYS[2]  its shard's alarm sorted set
-- ARGV[1]  reservation id
-- ARGV[2]  now (ms)
-- ARGV[3]  expiresAt (ms), which is also the alarm's due time
-- Returns  1 when the new alarm is the earliest of its shard (wake the scheduler), else 0.
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
local function int(s) return type(s) == 'string' and #s <= 16 and s:match('^%-?%d+$') ~= nil end
if not int(ARGV[2]) or not int(ARGV[3]) then
  return redis.error_reply('ERR create.lua: now and expiresAt must be integers')
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'status', 'held', 'createdAt', ARGV[2], 'expiresAt', ARGV[3], 'expirationCount', 0)
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
local head = redis.call('ZRANGE', KEYS[2], 0, 0)
if head[1] == ARGV[1] then
  return 1
end
return 0
