-- claim.lua: lease up to N due alarms of one shard in one atomic step.
-- KEYS[1]  the shard's alarm sorted set (member = object id, score = due time in ms)
-- KEYS[2]  the shard's attempt counts (hash: object id -> attempts so far), from an alarm's
--          second claim on: a first claim writes nothing there, so draining fresh alarms (the
--          common case) costs the hash nothing, and an alarm claimed again without a count was
--          on its first attempt
-- KEYS[3]  the shard's in-flight count (string: alarms claimed fresh and not yet done with)
-- ARGV[1]  now, in ms: only members with score <= now are claimed
-- ARGV[2]  the lease score: now + lease plus a fraction unique to this claim. Alarms set by
--          domains are whole ms, so a fractional score always means "leased or retrying".
-- ARGV[3]  the most members to claim
-- Returns  {head, id1, attempt1, due1, id2, attempt2, due2, ...}; head is the earliest score left
--          in the set after the claim ('' when empty). An alarm with a whole-ms score is fresh:
--          its attempt count restarts at 1 (a count left by an earlier round is cleared) and it
--          adds one to the in-flight count; a re-claimed one is already counted there.
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
local function int(s) return type(s) == 'string' and #s <= 16 and s:match('^%-?%d+$') ~= nil end
local function num(s) return type(s) == 'string' and #s <= 40 and s:match('^%-?%d+%.?%d*$') ~= nil end
if not int(ARGV[1]) or not num(ARGV[2]) or not int(ARGV[3]) then
  return redis.error_reply('ERR claim.lua: want an integer now, a lease score and an integer count')
end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[3]))
local out = {''}
local rescore = {}
local fresh = {}
for i = 1, #due, 2 do
  local id = due[i]
  local score = tonumber(due[i + 1])
  local attempt = 1
  if score % 1 == 0 then
    fresh[#fresh + 1] = id
  else
    attempt = redis.call('HINCRBY', KEYS[2], id, 1)
    if attempt == 1 then
      attempt = redis.call('HINCRBY', KEYS[2], id, 1)
    end
  end
  rescore[#rescore + 1] = ARGV[2]
  rescore[#rescore + 1] = id
  out[#out + 1] = id
  out[#out + 1] = attempt
  out[#out + 1] = due[i + 1]
end
-- One variadic call per thousand values rather than one call per alarm; unpack takes at most
-- a few thousand values (Lua's C stack), hence the chunks.
for i = 1, #fresh, 1000 do
  redis.call('HDEL', KEYS[2], unpack(fresh, i, math.min(i + 999, #fresh)))
end
if #fresh > 0 then
  redis.call('INCRBY', KEYS[3], #fresh)
end
for i = 1, #rescore, 1000 do
  redis.call('ZADD', KEYS[1], unpack(rescore, i, math.min(i + 999, #rescore)))
end
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if head[2] then
  out[1] = head[2]
end
return out
