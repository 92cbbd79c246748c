-- set.lua: set (replace) or delete one object's alarm. lib.lua comes first.
-- KEYS[1]  the shard's alarm sorted set
-- ARGV[1]  the object id
-- ARGV[2]  the due time in whole ms, or '' to delete the alarm
-- Returns  1 when the object's alarm is now the earliest of its shard (wake the scheduler), else 0.
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
if ARGV[2] == nil or (ARGV[2] ~= '' and not alarm_int(ARGV[2])) then
  return redis.error_reply('ERR set.lua: want a due time that is an integer or empty')
end
if ARGV[2] == '' then
  alarm_clear(KEYS[1], ARGV[1])
  return 0
end
return alarm_set(KEYS[1], ARGV[1], ARGV[2])
