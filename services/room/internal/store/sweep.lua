-- sweep.lua: the alarm's transition. Close sessions whose lease ended (their replica died),
-- then end the room if it has been idle for the TTL, else re-arm the alarm. Idempotent.
-- KEYS, ARGV[1..4]  see lib.lua
-- Returns  {0} no room (already deleted);
--          {2, reason} already ended: finish the clean-up;
--          {3, seq, viewersDelta, leadersDelta} ended now as expired: clean up;
--          {1, head, seq, viewersDelta, leadersDelta} still active (seq 0: no change).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return { 0 }
end
local e = ended()
if e then
  return { 2, e }
end
local dv, dl = 0, 0
local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[3])
for i = 1, #dead do
  local a, b = drop(dead[i])
  dv, dl = dv + a, dl + b
end
local seq = bump(dv, dl)
if tonumber(redis.call('HGET', KEYS[1], 'lastActivity')) + tonumber(ARGV[4]) <= tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[1], 'ended', 'expired')
  return { 3, seq, dv, dl }
end
return { 1, rearm(), seq, dv, dl }
