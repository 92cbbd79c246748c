-- create.lua: hold a reservation, resetting any earlier one, and replace its alarm. pkg/alarm's
-- contract (alarm_set, alarm_int) comes first.
-- KEYS[1]  the reservation's hash
-- KEYS[2]  its shard's alarm sorted set
-- ARGV[1]  reservation id
-- ARGV[2]  now (ms)
-- ARGV[3]  expiresAt (ms), which is also the alarm's due time
-- Returns  1 when the new alarm is the earliest of its shard (wake the scheduler), else 0.
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
if not alarm_int(ARGV[2]) or not alarm_int(ARGV[3]) then
  return redis.error_reply('ERR create.lua: want integer now and expiresAt')
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'status', 'held', 'createdAt', ARGV[2], 'expiresAt', ARGV[3], 'expirationCount', 0)
return alarm_set(KEYS[2], ARGV[1], ARGV[3])
