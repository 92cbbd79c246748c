-- join.lua: open a session, or re-attach an open one, and read the room's state for the joiner.
-- A session id that is already open with the same role and client id is re-attached (its
-- replica restarted or its stream broke): its lease is extended and it is not counted again.
-- KEYS, ARGV[1..4]  see lib.lua
-- ARGV[5]  session id
-- ARGV[6]  role: l or v
-- ARGV[7]  client id
-- ARGV[8]  lease end (ms)
-- ARGV[9]  attachment token (the stream's; leave.lua only closes the session for this token)
-- ARGV[10] the person's name (kept from their first open session; a re-attach changes nothing)
-- Returns  {-1} no room; {-2, reason} ended; {-3} the session id is open for another role or
--          client id; else {1, head, seq, viewersDelta, leadersDelta, state, marks, resumed,
--          lastRef, markFormations, people} where state is HMGET playing, positionMs, at, formation,
--          title, durationMs, viewers, leaders, version, rate, countBeats, countBpm, loopStart,
--          loopEnd; resumed is 1 for a re-attach; lastRef is the last control ref applied for
--          the session (0: none); markFormations is HGETALL of KEYS[10]; people is
--          HGETALL of the people (KEYS[11]).
if type(ARGV[5]) ~= 'string' or ARGV[5] == '' or (ARGV[6] ~= 'l' and ARGV[6] ~= 'v')
    or type(ARGV[7]) ~= 'string' or not int(ARGV[8]) or type(ARGV[9]) ~= 'string' or ARGV[9] == ''
    or type(ARGV[10]) ~= 'string' or ARGV[10] == '' then
  return redis.error_reply('ERR join.lua: want a session id, a role l or v, a client id, a lease end, an attachment token and a name')
end
local shut = closed()
if shut then
  return shut
end
local info = ARGV[6] .. ':' .. ARGV[7]
local open = redis.call('HGET', KEYS[3], ARGV[5])
local dv, dl, resumed = 0, 0, 0
if open then
  if open ~= info then
    return { -3 }
  end
  resumed = 1
  redis.call('ZADD', KEYS[2], ARGV[8], ARGV[5])
else
  redis.call('ZADD', KEYS[2], ARGV[8], ARGV[5])
  redis.call('HSET', KEYS[3], ARGV[5], info)
  arrive(info, ARGV[10])
  if ARGV[6] == 'l' then
    redis.call('HINCRBY', KEYS[1], 'leaders', 1)
    dl = 1
  elseif redis.call('HINCRBY', KEYS[4], ARGV[7], 1) == 1 then
    redis.call('HINCRBY', KEYS[1], 'viewers', 1)
    dv = 1
  end
end
redis.call('HSET', KEYS[8], ARGV[5], ARGV[9])
local seq = bump(dv, dl)
local head = rearm()
local state = redis.call('HMGET', KEYS[1], 'playing', 'positionMs', 'at', 'formation', 'title',
  'durationMs', 'viewers', 'leaders', 'version', 'rate', 'countBeats', 'countBpm', 'loopStart', 'loopEnd')
local lastRef = tonumber(redis.call('HGET', KEYS[9], ARGV[5]) or '0')
return { 1, head, seq, dv, dl, state, redis.call('LRANGE', KEYS[5], 0, -1), resumed, lastRef,
  redis.call('HGETALL', KEYS[10]), redis.call('HGETALL', KEYS[11]) }
