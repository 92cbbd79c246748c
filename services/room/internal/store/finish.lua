-- finish.lua: delete an ended room's storage (the last step of its clean-up) and leave a
-- tombstone. Idempotent; refuses to delete a room that has not ended.
-- KEYS, ARGV[1..4]  see lib.lua
-- ARGV[5]  tombstone TTL (ms)
-- Returns  1 deleted (or already gone), -1 the room is open.
if not nat(ARGV[5]) or ARGV[5] == '0' then
  return redis.error_reply('ERR finish.lua: want a positive tombstone TTL')
end
if redis.call('EXISTS', KEYS[1]) == 1 and not ended() then
  return -1
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12])
alarm_clear(KEYS[6], ARGV[1])
redis.call('SET', KEYS[7], 1, 'PX', ARGV[5])
return 1
