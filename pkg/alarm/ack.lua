-- ack.lua: remove handled alarms, but only those still leased by the claim that handled them.
-- KEYS[1]  the shard's alarm sorted set
-- KEYS[2]  the shard's attempt counts
-- ARGV[1]  the lease score the batch was claimed with
-- ARGV[2..] the object ids to acknowledge
-- Returns  how many alarms were removed. An id whose score changed to a whole ms was re-armed
--          by its object while it was handled: the new alarm stays, and its attempts restart.
--          An id with another fractional score was re-claimed by another scheduler: untouched.
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
local function int(s) return type(s) == 'string' and #s <= 16 and s:match('^%-?%d+$') ~= nil end
local function num(s) return type(s) == 'string' and #s <= 40 and s:match('^%-?%d+%.?%d*$') ~= nil end
if not num(ARGV[1]) then
  return redis.error_reply('ERR ack.lua: the lease score must be a number')
end
local lease = tonumber(ARGV[1])
local removed = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  local score = redis.call('ZSCORE', KEYS[1], id)
  if score and tonumber(score) == lease then
    redis.call('ZREM', KEYS[1], id)
    redis.call('HDEL', KEYS[2], id)
    removed = removed + 1
  elseif not score or tonumber(score) % 1 == 0 then
    redis.call('HDEL', KEYS[2], id)
  end
end
return removed
