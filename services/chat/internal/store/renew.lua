-- renew.lua: extend the leases of one stream's sessions, after closing every session whose
-- lease ended (so any replica holding a stream of the room sweeps it).
-- KEYS, ARGV[1..2]  see presence_lib.lua; the reply ends with the announcements (ditto)
-- ARGV[3] new lease end (ms)
-- ARGV[4] holder: the renewing stream's token
-- ARGV[5..] session ids
-- Returns {missing, moved}: the sessions that are no longer open (their lease ended first)
-- and those another stream holds now (re-attached elsewhere), neither renewed.
if not nat(ARGV[3]) or not word(ARGV[4]) then
  return redis.error_reply('ERR renew.lua: want a lease end and a holder')
end
sweep()
local missing, moved = {}, {}
for i = 5, #ARGV do
  local info = redis.call('HGET', KEYS[4], ARGV[i])
  if not info then
    missing[#missing + 1] = ARGV[i]
  elseif split(info) ~= ARGV[4] then
    moved[#moved + 1] = ARGV[i]
  else
    redis.call('ZADD', KEYS[3], ARGV[3], ARGV[i])
  end
end
return reply({ missing, moved })