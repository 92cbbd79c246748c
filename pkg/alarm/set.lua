-- set.lua: set (replace) or delete one object's alarm.
-- KEYS[1]  the shard's alarm sorted set
-- ARGV[1]  the object id
-- ARGV[2]  the due time in whole ms, or '' to delete the alarm
-- Returns  1 when the object's alarm is now the earliest of its shard (wake the scheduler), else 0.
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
local function int(s) return type(s) == 'string' and #s <= 16 and s:match('^%-?%d+$') ~= nil end
if ARGV[2] == nil or (ARGV[2] ~= '' and not int(ARGV[2])) then
  return redis.error_reply('ERR set.lua: the due time must be an integer or empty')
end
if ARGV[2] == '' then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
local head = redis.call('ZRANGE', KEYS[1], 0, 0)
if head[1] == ARGV[1] then
  return 1
end
return 0
