-- expire.lua: the alarm's transition, held -> expired, only when the hold is due. Replays and
-- repeated firings find it already expired and change nothing: expirationCount never passes 1.
-- KEYS[1]  the reservation's hash
-- KEYS[2]  its shard's alarm sorted set
-- ARGV[1]  reservation id
-- ARGV[2]  now (ms)
-- Returns  {changed (0|1), status, createdAt, expiresAt, expiredAt, expirationCount, alarmAt};
--          status is 'missing' (and the rest false) when the reservation does not exist.
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
local function int(s) return type(s) == 'string' and #s <= 16 and s:match('^%-?%d+$') ~= nil end
if not int(ARGV[2]) then
  return redis.error_reply('ERR expire.lua: now must be an integer')
end
local s = redis.call('HMGET', KEYS[1], 'status', 'createdAt', 'expiresAt', 'expiredAt', 'expirationCount')
if not s[1] then
  return {0, 'missing'}
end
local changed = 0
if s[1] == 'held' and tonumber(s[3]) <= tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'status', 'expired', 'expiredAt', ARGV[2])
  s[5] = redis.call('HINCRBY', KEYS[1], 'expirationCount', 1)
  s[1] = 'expired'
  s[4] = ARGV[2]
  redis.call('ZREM', KEYS[2], ARGV[1])
  changed = 1
end
return {changed, s[1], s[2], s[3], s[4], s[5], redis.call('ZSCORE', KEYS[2], ARGV[1])}
