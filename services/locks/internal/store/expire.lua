-- expire.lua: the lock's alarm transition, held -> free (or -> the next waiter), only if the
-- lease has ended. A replay, or an alarm that fires after a renew, changes nothing.
-- KEYS[1..4], ARGV[1..2]  as in lib.lua; the reply ends with the grant notices, as in lib.lua
-- Returns  {changed, wake}: changed 1 when the lease had ended; wake as in lib.lua.
local cur = redis.call('HMGET', lock_key, 'exp')
if cur[1] and tonumber(cur[1]) > now then
  -- Renewed while the alarm was being handled: keep the alarm at the lease end (a whole-ms
  -- score, which the queue's ack leaves in place).
  arm(tonumber(cur[1]))
  return reply({0, wake()})
end
if not cur[1] and redis.call('LLEN', queue_key) == 0 then
  return reply({0, wake()})
end
handoff()
return reply({1, wake()})
