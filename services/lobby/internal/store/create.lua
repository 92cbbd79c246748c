-- create.lua: add a room to the lobby unless its code is taken.
-- KEYS[1]  activity: sorted set, code -> last activity (ms)
-- KEYS[2]  info: hash, code -> "createdAt\ndurationMs\nname\ntitle"
-- KEYS[3]  token: hash, code -> leader token hash
-- KEYS[4]  seq: hash, code -> last applied occupancy sequence number
-- KEYS[5]  viewers: hash, code -> viewer count
-- KEYS[6]  leaders: hash, code -> leader session count
-- KEYS[7]  version: bumped by every change of the lobby, so readers can cache the list
-- KEYS[8]  changes: stream of {v = version, c = changed codes}, so a cached list is patched
-- ARGV[1]  code
-- ARGV[2]  now (ms)
-- ARGV[3]  info
-- ARGV[4]  token hash
-- Returns  1 when created, 0 when the code is taken (the caller draws another).
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
if type(ARGV[1]) ~= 'string' or not int(ARGV[2]) or type(ARGV[3]) ~= 'string' or type(ARGV[4]) ~= 'string' then
  return redis.error_reply('ERR create.lua: want a code, a time, the info and the token hash')
end
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[3]) == 0 then
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[4])
redis.call('HSET', KEYS[4], ARGV[1], 0)
redis.call('HSET', KEYS[5], ARGV[1], 0)
redis.call('HSET', KEYS[6], ARGV[1], 0)
log_change(KEYS[7], KEYS[8], ARGV[1])
return 1
