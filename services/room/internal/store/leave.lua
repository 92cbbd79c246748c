-- leave.lua: close a session (idempotent: an unknown session changes nothing). A session that
-- was re-attached to another stream since is not closed by the old stream's leave.
-- KEYS, ARGV[1..4]  see lib.lua
-- ARGV[5]  session id
-- ARGV[6]  attachment token of the closing stream ('' closes whatever holds the session)
-- Returns  {0} no room; else {1, head, seq, viewersDelta, leadersDelta} (seq 0: no change).
if type(ARGV[5]) ~= 'string' or type(ARGV[6]) ~= 'string' then
  return redis.error_reply('ERR leave.lua: want a session id and an attachment token')
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return { 0 }
end
local holder = redis.call('HGET', KEYS[8], ARGV[5])
if ARGV[6] ~= '' and holder and holder ~= ARGV[6] then
  return { 1, 0, 0, 0, 0 }
end
local dv, dl = drop(ARGV[5])
local seq = bump(dv, dl)
local head = 0
if not ended() then
  head = rearm()
end
return { 1, head, seq, dv, dl }
