-- leave.lua: a waiting call ends without having been told of a grant (its wait ran out, its
-- client went away, or it rechecks after a lost notice). Removes its queue entry, or finds
-- that the lock was granted to it.
-- KEYS[1..4], ARGV[1..2]  as in lib.lua; the reply ends with the grant notices, as in lib.lua
-- ARGV[3]  the waiter's entry
-- ARGV[4]  the waiter's id
-- ARGV[5]  '1' to give a lock granted to the waiter back (its caller is gone), '0' to keep it,
--          '2' only to look (stay queued when not granted)
-- Returns  {status, token, exp, holder, wake}: status 0 not granted (token, exp, holder are
--          the holder's, if any; the entry is gone unless ARGV[5] is '2'), 1 granted (token and
--          exp are the waiter's), 3 granted and given back.
if type(ARGV[3]) ~= 'string' or type(ARGV[4]) ~= 'string' or type(ARGV[5]) ~= 'string' then
  return redis.error_reply('ERR leave.lua: want an entry, a waiter id and a mode')
end
local mode = ARGV[5]
if mode ~= '2' and redis.call('LREM', queue_key, 1, ARGV[3]) == 1 then
  local holder, token, exp = settle()
  return reply({0, token or 0, exp or 0, holder or '', wake()})
end
local holder, token, exp, wid = settle()
if holder and wid == ARGV[4] then
  if mode == '1' then
    handoff()
    return reply({3, 0, 0, '', wake()})
  end
  return reply({1, token, exp, '', wake()})
end
return reply({0, token or 0, exp or 0, holder or '', wake()})
