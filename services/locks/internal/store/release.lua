-- release.lua: free the lock if the caller holds it, handing it to the next live waiter.
-- KEYS[1..4], ARGV[1..2]  as in lib.lua; the reply ends with the grant notices, as in lib.lua
-- ARGV[3]  owner
-- ARGV[4]  the releasing replica's grant channel: a waiter there is answered by the replica
--          from this reply, so its grant is not published
-- ARGV[5]  the fencing token of the hold to release, or '' for whatever hold owner has: a
--          release delayed from an earlier hold of the owner must not free a later one
-- Returns  {released, wake, wid, token, exp}: released 1 or 0 (the caller did not hold it, or
--          held it under another token); wake as in lib.lua; when a waiter got the lock by this
--          release, its id, token and lease end, else '', 0, 0.
if type(ARGV[3]) ~= 'string' or (ARGV[5] ~= nil and ARGV[5] ~= '' and not nat(ARGV[5])) then
  return redis.error_reply('ERR release.lua: want an owner and an optional fencing token')
end
local holder, held_token = settle()
quiet_channel = ARGV[4]
if holder ~= ARGV[3] or (ARGV[5] ~= nil and ARGV[5] ~= '' and held_token ~= tonumber(ARGV[5])) then
  return reply({0, wake(), '', 0, 0})
end
local next_owner, token, exp, wid = handoff()
if next_owner then
  return reply({1, wake(), wid, token, exp})
end
return reply({1, wake(), '', 0, 0})
