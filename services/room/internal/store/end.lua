-- end.lua: mark a room ended (the first reason wins) and make its alarm due now, so the alarm
-- finishes the clean-up if the caller does not.
-- KEYS, ARGV[1..4]  see lib.lua
-- ARGV[5]  reason
-- ARGV[6]  tombstone TTL (ms)
-- Returns  0 the room has no state here (it was never joined: tombstoned now), 1 ended.
if type(ARGV[5]) ~= 'string' or not nat(ARGV[6]) or ARGV[6] == '0' then
  return redis.error_reply('ERR end.lua: want a reason and a positive tombstone TTL')
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SET', KEYS[7], 1, 'PX', ARGV[6])
  return 0
end
if not ended() then
  redis.call('HSET', KEYS[1], 'ended', ARGV[5])
end
alarm_set(KEYS[6], ARGV[1], ARGV[3])
return 1
