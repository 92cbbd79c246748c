-- ceiling_lock_acquire.lua: the first half of the raw lock pair `vigilbench locks` measures
-- beside the lock service: the least a Redis lock can do (a probe, not the lock service's
-- acquire.lua: no queue, no fencing token, no notice).
-- KEYS[1]  the lock's key
-- ARGV[1]  the owner
-- ARGV[2]  the TTL in ms
-- Returns  1 when the lock was free and is now the owner's, 0 when it is held.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
return 0
