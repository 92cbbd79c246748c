-- join.lua: open a session, count it, and read the room's state for the joiner.
-- KEYS, ARGV[1..4]  see lib.lua
-- ARGV[5]  session id
-- ARGV[6]  role: l or v
-- ARGV[7]  client id
-- ARGV[8]  lease end (ms)
-- Returns  {-1} no room; {-2, reason} ended; else
--          {1, head, seq, viewersDelta, leadersDelta, state, marks} where state is
--          HMGET playing, positionMs, at, formation, title, durationMs, viewers, leaders, version.
if type(ARGV[5]) ~= 'string' or (ARGV[6] ~= 'l' and ARGV[6] ~= 'v') or type(ARGV[7]) ~= 'string' or not int(ARGV[8]) then
  return redis.error_reply('ERR join.lua: want a session id, a role l or v, a client id and a lease end')
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return { -1 }
end
local e = ended()
if e then
  return { -2, e }
end
redis.call('ZADD', KEYS[2], ARGV[8], ARGV[5])
redis.call('HSET', KEYS[3], ARGV[5], ARGV[6] .. ':' .. ARGV[7])
local dv, dl = 0, 0
if ARGV[6] == 'l' then
  redis.call('HINCRBY', KEYS[1], 'leaders', 1)
  dl = 1
elseif redis.call('HINCRBY', KEYS[4], ARGV[7], 1) == 1 then
  redis.call('HINCRBY', KEYS[1], 'viewers', 1)
  dv = 1
end
local seq = bump(dv, dl)
local head = rearm()
local state = redis.call('HMGET', KEYS[1], 'playing', 'positionMs', 'at', 'formation', 'title',
  'durationMs', 'viewers', 'leaders', 'version')
return { 1, head, seq, dv, dl, state, redis.call('LRANGE', KEYS[5], 0, -1) }
