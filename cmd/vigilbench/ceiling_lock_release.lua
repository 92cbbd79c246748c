-- ceiling_lock_release.lua: the second half of the raw lock pair (a probe, not the lock
-- service's release.lua): delete the lock when the owner still holds it.
-- KEYS[1]  the lock's key
-- ARGV[1]  the owner
-- Returns  1 when it deleted the lock, 0 when another owner (or nobody) held it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
