-- renew.lua: extend the lease if the caller holds the lock.
-- KEYS[1..4], ARGV[1..2]  as in lib.lua
-- ARGV[3]  owner
-- ARGV[4]  ttl in ms from now
-- Returns  {renewed, exp, wake}: renewed 1 with the new lease end, or 0 (not the holder).
if type(ARGV[3]) ~= 'string' or not nat(ARGV[4]) then
  return redis.error_reply('ERR renew.lua: want an owner and a ttl')
end
local holder = settle()
if holder ~= ARGV[3] then
  return {0, 0, wake()}
end
local exp = now + tonumber(ARGV[4])
redis.call('HSET', lock_key, 'exp', string.format('%d', exp))
arm(exp)
return {1, exp, wake()}
