-- ceiling_cas.lua: the raw Redis ceiling's script for redis-benchmark: a compare-and-set on one
-- hash field, the same shape of work as an alarm transition (read a status, write it when it
-- matches). The benchmark passes the status it will find, so every call writes.
-- KEYS[1]  a hash
-- ARGV[1]  the status expected (a missing hash matches too)
-- ARGV[2]  the status to set
-- ARGV[3]  a timestamp to record beside it
-- Returns  1 when it wrote, 0 when the status did not match.
local v = redis.call('HGET', KEYS[1], 'status')
if v == false or v == ARGV[1] then
  redis.call('HSET', KEYS[1], 'status', ARGV[2], 'at', ARGV[3])
  return 1
end
return 0
