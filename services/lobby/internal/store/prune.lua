-- list.lua: prune rooms idle past the cutoff, then list the rest, most recently active first.
-- KEYS[1..6]  activity, info, token, seq, viewers, leaders (as in create.lua)
-- ARGV[1]     cutoff (ms): rooms whose last activity is before it are pruned
-- ARGV[2]     the most rooms to prune in one call (the rest are only hidden)
-- Returns     { {code, lastActivity, ...}, {info...}, {viewers...}, {leaders...}, pruned }
--             where the last three line up with the codes (false where a field is missing).
local pruned = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for i = 1, #pruned do
  redis.call('ZREM', KEYS[1], pruned[i])
  for k = 2, 6 do
    redis.call('HDEL', KEYS[k], pruned[i])
  end
end
local rows = redis.call('ZREVRANGEBYSCORE', KEYS[1], '+inf', ARGV[1], 'WITHSCORES')
local infos, viewers, leaders = {}, {}, {}
-- HMGET in chunks: Lua's unpack has a stack limit of a few thousand values.
local chunk = 1000
local n = #rows / 2
local i = 1
while i <= n do
  local codes = {}
  for j = i, math.min(i + chunk - 1, n) do
    codes[#codes + 1] = rows[2 * j - 1]
  end
  local a = redis.call('HMGET', KEYS[2], unpack(codes))
  local b = redis.call('HMGET', KEYS[5], unpack(codes))
  local c = redis.call('HMGET', KEYS[6], unpack(codes))
  for j = 1, #codes do
    infos[#infos + 1] = a[j]
    viewers[#viewers + 1] = b[j]
    leaders[#leaders + 1] = c[j]
  end
  i = i + chunk
end
return { rows, infos, viewers, leaders, #pruned }
