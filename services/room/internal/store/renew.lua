-- renew.lua: extend the leases of one replica's sessions of a room.
-- KEYS, ARGV[1..4]  see lib.lua
-- ARGV[5]  new lease end (ms)
-- ARGV[6..]  session ids
-- Returns  {-1} no room; {-2, reason} ended; else {1, head, missing} where missing lists the
--          sessions that are no longer open (swept after their lease ended).
if not int(ARGV[5]) then
  return redis.error_reply('ERR renew.lua: want a lease end')
end
local shut = closed()
if shut then
  return shut
end
local missing = {}
for i = 6, #ARGV do
  if redis.call('ZSCORE', KEYS[2], ARGV[i]) then
    redis.call('ZADD', KEYS[2], ARGV[5], ARGV[i])
  else
    missing[#missing + 1] = ARGV[i]
  end
end
return { 1, rearm(), missing }
