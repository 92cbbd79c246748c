-- settle.lua: the client's transition, held -> confirmed or released, removing the alarm. A hold
-- already past its expiry is expired first (the alarm may not have fired yet), then refused.
-- pkg/alarm's contract (alarm_clear, alarm_due, alarm_int) comes first.
-- KEYS[1]  the reservation's hash
-- KEYS[2]  its shard's alarm sorted set
-- ARGV[1]  reservation id
-- ARGV[2]  the target status: 'confirmed' or 'released'
-- ARGV[3]  now (ms)
-- Returns  {outcome, status, createdAt, expiresAt, expiredAt, expirationCount, alarmAt};
--          outcome is 'ok', 'missing' or 'conflict'.
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
if not alarm_int(ARGV[3]) or (ARGV[2] ~= 'confirmed' and ARGV[2] ~= 'released') then
  return redis.error_reply('ERR settle.lua: want a target status and an integer now')
end
local s = redis.call('HMGET', KEYS[1], 'status', 'createdAt', 'expiresAt', 'expiredAt', 'expirationCount')
if not s[1] then
  return {'missing', 'missing'}
end
if s[1] == 'held' and tonumber(s[3]) <= tonumber(ARGV[3]) then
  s[5] = (tonumber(s[5]) or 0) + 1
  redis.call('HSET', KEYS[1], 'status', 'expired', 'expiredAt', ARGV[3], 'expirationCount', s[5])
  s[1] = 'expired'
  s[4] = ARGV[3]
  alarm_clear(KEYS[2], ARGV[1])
end
local outcome = 'ok'
if s[1] == 'held' then
  redis.call('HSET', KEYS[1], 'status', ARGV[2])
  alarm_clear(KEYS[2], ARGV[1])
  s[1] = ARGV[2]
elseif s[1] ~= ARGV[2] then
  outcome = 'conflict'
end
return {outcome, s[1], s[2], s[3], s[4], s[5], alarm_due(KEYS[2], ARGV[1])}
