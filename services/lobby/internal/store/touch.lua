-- touch.lua: raise a room's last activity (never lower it, never re-create a removed room).
-- KEYS[1]  activity
-- KEYS[2]  version
-- KEYS[3]  changes
-- ARGV[1]  code
-- ARGV[2]  activity time (ms)
-- Returns  1 when the activity moved, else 0.
if redis.call('ZADD', KEYS[1], 'XX', 'GT', 'CH', ARGV[2], ARGV[1]) == 1 then
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', 10000, '*', 'v', redis.call('INCR', KEYS[2]), 'c', ARGV[1])
  return 1
end
return 0
