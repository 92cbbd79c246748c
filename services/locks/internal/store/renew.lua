-- renew.lua: extend the lease if the caller holds the lock.
-- KEYS[1..4], ARGV[1..2]  as in lib.lua; the reply ends with the grant notices, as in lib.lua
-- ARGV[3]  owner
-- ARGV[4]  ttl in ms from now
-- ARGV[5]  the fencing token of the hold to extend, or '' for whatever hold owner has: a
--          renewal delayed from an earlier hold of the owner must not extend a later one
-- Returns  {renewed, exp, wake}: renewed 1 with the new lease end, or 0 (not the holder, or
--          the holder under another token).
if type(ARGV[3]) ~= 'string' or not nat(ARGV[4]) or (ARGV[5] ~= nil and ARGV[5] ~= '' and not nat(ARGV[5])) then
  return redis.error_reply('ERR renew.lua: want an owner, a ttl and an optional fencing token')
end
local holder, held_token = settle()
if holder ~= ARGV[3] or (ARGV[5] ~= nil and ARGV[5] ~= '' and held_token ~= tonumber(ARGV[5])) then
  return reply({0, 0, wake()})
end
local exp = now + tonumber(ARGV[4])
redis.call('HSET', lock_key, 'exp', string.format('%d', exp))
arm(exp)
return reply({1, exp, wake()})
