-- list.lua: prune rooms idle past the cutoff (listing reads the live ones with plain commands).
-- KEYS[1..8]  activity, info, token, seq, viewers, leaders, version, changes (as in create.lua)
-- ARGV[1]     cutoff (ms): rooms whose last activity is before it are pruned
-- ARGV[2]     the most rooms to prune in one call (the rest go on later calls)
-- Returns     how many rooms it pruned.
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
if not int(ARGV[1]) or not nat(ARGV[2]) then
  return redis.error_reply('ERR prune.lua: want a cutoff and a limit')
end
local pruned = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for i = 1, #pruned do
  redis.call('ZREM', KEYS[1], pruned[i])
  for k = 2, 6 do
    redis.call('HDEL', KEYS[k], pruned[i])
  end
end
if #pruned > 0 then
  log_change(KEYS[7], KEYS[8], table.concat(pruned, ' '))
end
return #pruned
