-- retry.lua: after a failed attempt, re-score the alarm for a retry or move it to dead letters.
-- KEYS[1]  the shard's alarm sorted set
-- KEYS[2]  the shard's attempt counts
-- KEYS[3]  the shard's dead-letter sorted set (member = object id, score = when it died, ms)
-- KEYS[4]  the shard's dead-letter details (hash: object id -> JSON {error, attempts, at})
-- KEYS[5]  the shard's in-flight count
-- ARGV[1]  the lease score the alarm was claimed with
-- ARGV[2]  the object id
-- ARGV[3]  the retry score (fractional, so it still counts as a retry when claimed)
-- ARGV[4]  1 to dead-letter instead of retrying
-- ARGV[5]  now, in ms
-- ARGV[6]  the dead-letter details (JSON)
-- Returns  0 when the alarm is no longer ours (re-armed or re-claimed), 1 retried, 2 dead. A
--          flight that ends here (dead, or the alarm gone, re-armed or claimed fresh since: see
--          ack.lua) leaves the in-flight count.
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
local function int(s) return type(s) == 'string' and #s <= 16 and s:match('^%-?%d+$') ~= nil end
local function num(s) return type(s) == 'string' and #s <= 40 and s:match('^%-?%d+%.?%d*$') ~= nil end
if not num(ARGV[1]) or not num(ARGV[3]) or not int(ARGV[5]) then
  return redis.error_reply('ERR retry.lua: want lease and retry scores and an integer now')
end
local function landed()
  if redis.call('DECR', KEYS[5]) <= 0 then
    redis.call('DEL', KEYS[5])
  end
end
local score = redis.call('ZSCORE', KEYS[1], ARGV[2])
if not score or tonumber(score) ~= tonumber(ARGV[1]) then
  if not score or tonumber(score) % 1 == 0 or redis.call('HEXISTS', KEYS[2], ARGV[2]) == 0 then
    landed()
  end
  return 0
end
if ARGV[4] == '1' then
  redis.call('ZREM', KEYS[1], ARGV[2])
  redis.call('HDEL', KEYS[2], ARGV[2])
  redis.call('ZADD', KEYS[3], ARGV[5], ARGV[2])
  redis.call('HSET', KEYS[4], ARGV[2], ARGV[6])
  landed()
  return 2
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
return 1
