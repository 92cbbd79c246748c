-- expire.lua: the alarm's transition, held -> expired, only when a hold is due, for one
-- reservation (a replay) or a whole claimed batch of one shard in one call (the scheduler).
-- Replays and repeated firings find a hold already expired and change nothing:
-- expirationCount never passes 1. pkg/alarm's contract (alarm_clear_all, alarm_due,
-- alarm_int) comes first.
-- KEYS[1]       the shard's alarm sorted set
-- KEYS[2..n+1]  the reservations' hashes (all of that shard)
-- ARGV[1]       now (ms)
-- ARGV[2]       'full': answer each reservation's state; 'brief': answer only what changed
-- ARGV[3..n+2]  the reservation ids, in the order of their hashes
-- Returns  full:  one {changed (0|1), status, createdAt, expiresAt, expiredAt, expirationCount,
--                 alarmAt} per reservation, in order; status is 'missing' (and the rest absent)
--                 for one that does not exist;
--          brief: one changed (0|1) per reservation, in order (the alarm handler's answer: a
--                 batch of 256 costs Redis no reply to build beyond that).
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
if not alarm_int(ARGV[1]) or (ARGV[2] ~= 'full' and ARGV[2] ~= 'brief') or #KEYS < 2 or #ARGV ~= #KEYS + 1 then
  return redis.error_reply('ERR expire.lua: want an integer now, full or brief, and one id per reservation key')
end
local now = ARGV[1]
local nowN = tonumber(now)
local full = ARGV[2] == 'full'
local out, expired = {}, {}
for i = 2, #KEYS do
  local id = ARGV[i + 1]
  if full then
    local s = redis.call('HMGET', KEYS[i], 'status', 'createdAt', 'expiresAt', 'expiredAt', 'expirationCount')
    if not s[1] then
      out[#out + 1] = {0, 'missing'}
    elseif s[1] == 'held' and tonumber(s[3]) <= nowN then
      local count = (tonumber(s[5]) or 0) + 1
      redis.call('HSET', KEYS[i], 'status', 'expired', 'expiredAt', now, 'expirationCount', count)
      expired[#expired + 1] = id
      out[#out + 1] = {1, 'expired', s[2], s[3], now, count, false}
    else
      out[#out + 1] = {0, s[1], s[2], s[3], s[4], s[5], alarm_due(KEYS[1], id)}
    end
  else
    local s = redis.call('HMGET', KEYS[i], 'status', 'expiresAt', 'expirationCount')
    if s[1] == 'held' and tonumber(s[2]) <= nowN then
      redis.call('HSET', KEYS[i], 'status', 'expired', 'expiredAt', now, 'expirationCount', (tonumber(s[3]) or 0) + 1)
      expired[#expired + 1] = id
      out[#out + 1] = 1
    else
      out[#out + 1] = 0
    end
  end
end
alarm_clear_all(KEYS[1], expired)
return out
