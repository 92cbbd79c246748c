-- init.lua: create a room's state from its Lobby entry, unless it exists or was deleted.
-- KEYS, ARGV[1..4]  see lib.lua
-- ARGV[5]  last activity (ms), from the Lobby
-- ARGV[6]  created at (ms)
-- ARGV[7]  video title
-- ARGV[8]  video duration (ms)
-- Returns  {-1} tombstoned (ended: do not revive), {0} already there, {1, head} created, where
--          head is the due time of its alarm (ms) when that is the shard's head, else 0.
if not int(ARGV[5]) or not int(ARGV[6]) or type(ARGV[7]) ~= 'string' or not nat(ARGV[8]) then
  return redis.error_reply('ERR init.lua: want an activity time, a creation time, a title and a duration')
end
if redis.call('EXISTS', KEYS[7]) == 1 then
  return { -1 }
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return { 0 }
end
redis.call('HSET', KEYS[1], 'lastActivity', ARGV[5], 'createdAt', ARGV[6], 'title', ARGV[7],
  'durationMs', ARGV[8], 'playing', 0, 'positionMs', 0, 'at', ARGV[6], 'seq', 0, 'viewers', 0,
  'leaders', 0, 'version', 0, 'ended', '')
return { 1, rearm() }
