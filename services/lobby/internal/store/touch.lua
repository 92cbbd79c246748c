-- touch.lua: raise a room's last activity (never lower it, never re-create a removed room).
-- KEYS[1]  activity
-- KEYS[2]  version
-- KEYS[3]  changes
-- ARGV[1]  code
-- ARGV[2]  activity time (ms)
-- Returns  1 when the activity moved, else 0.
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
if type(ARGV[1]) ~= 'string' or not int(ARGV[2]) then
  return redis.error_reply('ERR touch.lua: want a code and a time')
end
if redis.call('ZADD', KEYS[1], 'XX', 'GT', 'CH', ARGV[2], ARGV[1]) == 1 then
  log_change(KEYS[2], KEYS[3], ARGV[1])
  return 1
end
return 0
