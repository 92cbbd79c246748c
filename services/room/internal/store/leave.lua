-- leave.lua: close a session (idempotent: an unknown session changes nothing).
-- KEYS, ARGV[1..4]  see lib.lua
-- ARGV[5]  session id
-- Returns  {0} no room; else {1, head, seq, viewersDelta, leadersDelta} (seq 0: no change).
if type(ARGV[5]) ~= 'string' then
  return redis.error_reply('ERR leave.lua: want a session id')
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return { 0 }
end
local dv, dl = drop(ARGV[5])
local seq = bump(dv, dl)
local head = 0
if not ended() then
  head = rearm()
end
return { 1, head, seq, dv, dl }
