-- act.lua: apply a leader action, record the activity, move the alarm and publish the stamped
-- frame as "<version> f <frame>" for every replica to relay. A control ref at or below the
-- session's last applied one is a repeat (re-sent after a re-attach) and changes nothing.
-- KEYS, ARGV[1..4]  see lib.lua
-- ARGV[5]  kind: sync, formation, mark or reload
-- ARGV[6]  the stamped frame to publish (opaque bytes)
-- ARGV[7]  the acting session's id
-- ARGV[8]  the action's control ref (0: none, never a repeat)
-- ARGV[9..]  sync: playing (0/1), positionMs | formation: JSON | mark: the mark (opaque bytes) |
--            reload: has video (0/1), title, durationMs
-- Returns  {-1} no room; {-2, reason} ended; {-3} the session is not open (its lease ended);
--          {2} a repeat, not applied again; {1, head} applied.
if type(ARGV[5]) ~= 'string' or type(ARGV[6]) ~= 'string' or type(ARGV[7]) ~= 'string' or not nat(ARGV[8])
    or type(ARGV[9]) ~= 'string'
    or (ARGV[5] == 'sync' and ((ARGV[9] ~= '0' and ARGV[9] ~= '1') or not nat(ARGV[10])))
    or (ARGV[5] == 'reload' and ARGV[9] == '1' and (type(ARGV[10]) ~= 'string' or not nat(ARGV[11]))) then
  return redis.error_reply('ERR act.lua: want a kind, a frame, a session, a ref and the values of the kind')
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return { -1 }
end
local e = ended()
if e then
  return { -2, e }
end
if redis.call('HEXISTS', KEYS[3], ARGV[7]) == 0 then
  return { -3 }
end
if ARGV[8] ~= '0' then
  if tonumber(redis.call('HGET', KEYS[9], ARGV[7]) or '0') >= tonumber(ARGV[8]) then
    return { 2 }
  end
  redis.call('HSET', KEYS[9], ARGV[7], ARGV[8])
end
redis.call('HSET', KEYS[1], 'lastActivity', ARGV[3])
local kind = ARGV[5]
if kind == 'sync' then
  redis.call('HSET', KEYS[1], 'playing', ARGV[9], 'positionMs', ARGV[10], 'at', ARGV[3])
elseif kind == 'formation' then
  redis.call('HSET', KEYS[1], 'formation', ARGV[9])
elseif kind == 'mark' then
  redis.call('RPUSH', KEYS[5], ARGV[9])
  redis.call('LTRIM', KEYS[5], -200, -1)
elseif kind == 'reload' and ARGV[9] == '1' then
  redis.call('HSET', KEYS[1], 'title', ARGV[10], 'durationMs', ARGV[11], 'playing', 0,
    'positionMs', 0, 'at', ARGV[3])
  redis.call('DEL', KEYS[5])
end
local v = redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('PUBLISH', ARGV[2], v .. ' f ' .. ARGV[6])
return { 1, rearm() }
