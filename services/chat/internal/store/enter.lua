-- enter.lua: open a session, or re-attach an open one: a session id open for the same user
-- takes the new holder and lease and announces nothing. The user's first open session makes
-- them present under its username.
-- KEYS, ARGV[1..2]  see presence_lib.lua; the reply ends with the announcements (ditto)
-- ARGV[3] session id
-- ARGV[4] user id
-- ARGV[5] username
-- ARGV[6] holder: the entering stream's token
-- ARGV[7] lease end (ms)
-- Returns {1} entered, {0} re-attached, {-1} the session id is open for another user.
if not word(ARGV[3]) or type(ARGV[4]) ~= 'string' or ARGV[4] == '' or type(ARGV[5]) ~= 'string' or ARGV[5] == ''
    or not word(ARGV[6]) or not nat(ARGV[7]) then
  return redis.error_reply('ERR enter.lua: want a session id, a user id, a username, a holder and a lease end')
end
sweep()
local info = redis.call('HGET', KEYS[4], ARGV[3])
if info then
  local _, user = split(info)
  if user ~= ARGV[4] then
    return reply({ -1 })
  end
  redis.call('HSET', KEYS[4], ARGV[3], ARGV[6] .. '\t' .. ARGV[4])
  redis.call('ZADD', KEYS[3], ARGV[7], ARGV[3])
  return reply({ 0 })
end
redis.call('HSET', KEYS[4], ARGV[3], ARGV[6] .. '\t' .. ARGV[4])
redis.call('ZADD', KEYS[3], ARGV[7], ARGV[3])
if redis.call('HINCRBY', KEYS[2], ARGV[4], 1) == 1 then
  local v = next_version()
  redis.call('HSET', KEYS[1], ARGV[4], v .. ' ' .. ARGV[2] .. ' ' .. ARGV[5])
  announced[#announced + 1] = 'p' .. v .. '\tj\t' .. ARGV[4] .. '\t' .. ARGV[2] .. '\t' .. ARGV[5]
end
return reply({ 1 })