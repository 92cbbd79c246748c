-- snapshot.lua: set a room's absolute occupancy unless a newer sequence number is applied.
-- KEYS[1]  activity (the room's presence in the lobby)
-- KEYS[2]  seq
-- KEYS[3]  viewers
-- KEYS[4]  leaders
-- KEYS[5]  version
-- KEYS[6]  changes
-- ARGV[1]  code
-- ARGV[2]  the snapshot's sequence number
-- ARGV[3]  viewers
-- ARGV[4]  leaders
-- Returns  1 applied, 0 stale, -1 no room.
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
if type(ARGV[1]) ~= 'string' or not nat(ARGV[2]) or not int(ARGV[3]) or not int(ARGV[4]) then
  return redis.error_reply('ERR snapshot.lua: want a code, a sequence number, viewers and leaders')
end
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return -1
end
local cur = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if tonumber(ARGV[2]) < cur then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[4], ARGV[1], ARGV[4])
log_change(KEYS[5], KEYS[6], ARGV[1])
return 1
