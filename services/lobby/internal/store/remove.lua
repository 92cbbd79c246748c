-- remove.lua: drop rooms from the lobby; missing ones are no error.
-- KEYS[1..8]  activity, info, token, seq, viewers, leaders, version, changes (as in create.lua)
-- ARGV[1..n]  codes
-- Returns     how many of the codes were there.
local n = 0
for i = 1, #ARGV do
  n = n + redis.call('ZREM', KEYS[1], ARGV[i])
  for k = 2, 6 do
    redis.call('HDEL', KEYS[k], ARGV[i])
  end
end
if n > 0 then
  log_change(KEYS[7], KEYS[8], table.concat(ARGV, ' '))
end
return n
