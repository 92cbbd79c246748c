-- acquire.lua: take a free lock, refresh one the caller holds, or queue the caller.
-- KEYS[1..4], ARGV[1..2]  as in lib.lua; the reply ends with the grant notices, as in lib.lua
-- ARGV[3]  owner
-- ARGV[4]  ttl in ms
-- ARGV[5]  the caller's waiter entry to queue when the lock is held, or '' not to wait
-- ARGV[6]  how long the queue must live at least, in ms (the waiter's wait plus slack)
-- ARGV[7]  the most waiters the queue may hold ('0': no limit); one more is refused (0)
-- Returns  {status, token, exp, holder, wake}: status 1 acquired (token and exp are the
--          caller's), 0 refused or 2 queued (token, exp and holder are the holder's); wake as
--          in lib.lua.
if type(ARGV[3]) ~= 'string' or not nat(ARGV[4]) or type(ARGV[5]) ~= 'string' or not nat(ARGV[7])
    or (ARGV[5] ~= '' and (not nat(ARGV[6]) or not ARGV[5]:match('^%d+\n%d+\n[^\n]+\n[^\n]*\n'))) then
  return redis.error_reply('ERR acquire.lua: want an owner, a ttl and an optional waiter entry with its keep time')
end
local owner, ttl = ARGV[3], tonumber(ARGV[4])
local holder, token, exp = settle()
if not holder then
  token, exp = grant(owner, ttl, '')
  return reply({1, token, exp, '', wake()})
end
if holder == owner then
  -- A retried acquire must not lock its own caller out: same token, fresh lease. The grant
  -- now belongs to this call, not to a waiting call that may still be abandoned (wid = '').
  exp = now + ttl
  redis.call('HSET', lock_key, 'exp', string.format('%d', exp), 'wid', '')
  arm(exp)
  return reply({1, token, exp, '', wake()})
end
if ARGV[5] ~= '' then
  local most = tonumber(ARGV[7])
  if most > 0 and redis.call('LLEN', queue_key) >= most then
    return reply({0, token, exp, holder, 0})
  end
  redis.call('RPUSH', queue_key, ARGV[5])
  -- The queue outlives its last waiter only briefly, so waiters of a crashed service vanish.
  local keep = tonumber(ARGV[6])
  if redis.call('PTTL', queue_key) < keep then
    redis.call('PEXPIRE', queue_key, keep)
  end
  return reply({2, token, exp, holder, 0})
end
return reply({0, token, exp, holder, 0})
