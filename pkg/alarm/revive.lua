-- revive.lua: take an alarm out of the dead letters, either back into the queue or away.
-- KEYS[1]  the shard's alarm sorted set
-- KEYS[2]  the shard's attempt counts
-- KEYS[3]  the shard's dead-letter sorted set
-- KEYS[4]  the shard's dead-letter details
-- ARGV[1]  the object id
-- ARGV[2]  the due time to re-arm it at (whole ms), or '' to discard it
-- Returns  1 when the id was a dead letter, 0 when it was not.
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
local function int(s) return type(s) == 'string' and #s <= 16 and s:match('^%-?%d+$') ~= nil end
if ARGV[2] == nil or (ARGV[2] ~= '' and not int(ARGV[2])) then
  return redis.error_reply('ERR revive.lua: the due time must be an integer or empty')
end
if redis.call('ZREM', KEYS[3], ARGV[1]) == 0 then
  return 0
end
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if ARGV[2] ~= '' then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
end
return 1
