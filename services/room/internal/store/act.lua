-- act.lua: apply a leader action, record the activity, move the alarm and publish the stamped
-- frame as "<version> f <frame>" for every replica to relay.
-- KEYS, ARGV[1..4]  see lib.lua
-- ARGV[5]  kind: sync, formation, mark or reload
-- ARGV[6]  the stamped frame to publish (opaque bytes)
-- ARGV[7..]  sync: playing (0/1), positionMs | formation: JSON | mark: the mark (opaque bytes) |
--            reload: has video (0/1), title, durationMs
-- Returns  {-1} no room; {-2, reason} ended; {1, head}.
if type(ARGV[5]) ~= 'string' or type(ARGV[6]) ~= 'string' or type(ARGV[7]) ~= 'string'
    or (ARGV[5] == 'sync' and ((ARGV[7] ~= '0' and ARGV[7] ~= '1') or not nat(ARGV[8])))
    or (ARGV[5] == 'reload' and ARGV[7] == '1' and (type(ARGV[8]) ~= 'string' or not nat(ARGV[9]))) then
  return redis.error_reply('ERR act.lua: want a kind, a frame and the values of the kind')
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return { -1 }
end
local e = ended()
if e then
  return { -2, e }
end
redis.call('HSET', KEYS[1], 'lastActivity', ARGV[3])
local kind = ARGV[5]
if kind == 'sync' then
  redis.call('HSET', KEYS[1], 'playing', ARGV[7], 'positionMs', ARGV[8], 'at', ARGV[3])
elseif kind == 'formation' then
  redis.call('HSET', KEYS[1], 'formation', ARGV[7])
elseif kind == 'mark' then
  redis.call('RPUSH', KEYS[5], ARGV[7])
  redis.call('LTRIM', KEYS[5], -200, -1)
elseif kind == 'reload' and ARGV[7] == '1' then
  redis.call('HSET', KEYS[1], 'title', ARGV[8], 'durationMs', ARGV[9], 'playing', 0,
    'positionMs', 0, 'at', ARGV[3])
  redis.call('DEL', KEYS[5])
end
local v = redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('PUBLISH', ARGV[2], v .. ' f ' .. ARGV[6])
return { 1, rearm() }
