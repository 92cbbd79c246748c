-- delta.lua: apply an occupancy delta only if it is exactly the next one (compare-and-set on
-- the sequence number). Go twin: domain.NextDelta.
-- KEYS[1]  activity (the room's presence in the lobby)
-- KEYS[2]  seq
-- KEYS[3]  viewers
-- KEYS[4]  leaders
-- KEYS[5]  version
-- KEYS[6]  changes
-- ARGV[1]  code
-- ARGV[2]  the delta's sequence number
-- ARGV[3]  viewers delta
-- ARGV[4]  leaders delta
-- Returns  1 applied, 2 stale (already covered), 3 resync (a delta is missing), -1 no room.
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
if type(ARGV[1]) ~= 'string' or not nat(ARGV[2]) or not int(ARGV[3]) or not int(ARGV[4]) then
  return redis.error_reply('ERR delta.lua: want a code, a sequence number, viewers and leaders')
end
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return -1
end
local cur = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
local seq = tonumber(ARGV[2])
if seq <= cur then
  return 2
end
if seq ~= cur + 1 then
  return 3
end
-- The argument's digits, as snapshot.lua stores them, not the Lua number (a double that Redis
-- formats back): a seq that jumped to Redis TIME in µs after a room store's failover has 16.
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
if redis.call('HINCRBY', KEYS[3], ARGV[1], ARGV[3]) < 0 then
  redis.call('HSET', KEYS[3], ARGV[1], 0)
end
if redis.call('HINCRBY', KEYS[4], ARGV[1], ARGV[4]) < 0 then
  redis.call('HSET', KEYS[4], ARGV[1], 0)
end
log_change(KEYS[5], KEYS[6], ARGV[1])
return 1
