-- get.lua: read a reservation and its alarm in one atomic step. pkg/alarm's contract
-- (alarm_due) comes first.
-- KEYS[1]  the reservation's hash
-- KEYS[2]  its shard's alarm sorted set
-- ARGV[1]  reservation id
-- Returns  {status, createdAt, expiresAt, expiredAt, expirationCount, alarmAt}, with status
--          'missing' when the reservation does not exist.
local s = redis.call('HMGET', KEYS[1], 'status', 'createdAt', 'expiresAt', 'expiredAt', 'expirationCount')
if not s[1] then
  return {'missing'}
end
return {s[1], s[2], s[3], s[4], s[5], alarm_due(KEYS[2], ARGV[1])}
