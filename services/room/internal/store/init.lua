-- init.lua: create a room's state from its Lobby entry, unless it exists or was deleted.
-- KEYS, ARGV[1..4]  see lib.lua
-- ARGV[5]  last activity (ms), from the Lobby
-- ARGV[6]  created at (ms)
-- ARGV[7]  video title
-- ARGV[8]  video duration (ms)
-- Returns  {-1} tombstoned (ended: do not revive), {0} already there, {1, head} created, where
--          head is the due time of its alarm (ms) when that is the shard's head, else 0.
-- The room's counters (version, seq) start at Redis TIME in microseconds, not 0: a failover that
-- lost the whole state (a room first joined just before it) creates it again here, and the
-- versions and seqs of that lost life must not be handed out again (the Lobby would drop the
-- changes as applied, the gateway the frames as seen). The Lobby then holds no seq just before
-- the room's first one: the replica that created the state sends a snapshot for its join (any
-- other's delta is a gap, and ends in one). Their epochs (count in lib.lua) are this primary's.
if not int(ARGV[5]) or not int(ARGV[6]) or type(ARGV[7]) ~= 'string' or not nat(ARGV[8]) then
  return redis.error_reply('ERR init.lua: want an activity time, a creation time, a title and a duration')
end
if redis.call('EXISTS', KEYS[7]) == 1 then
  return { -1 }
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return { 0 }
end
local t = redis.call('TIME')
local start = string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2]))
local id = replication_id()
redis.call('HSET', KEYS[1], 'lastActivity', ARGV[5], 'createdAt', ARGV[6], 'title', ARGV[7],
  'durationMs', ARGV[8], 'playing', 0, 'positionMs', 0, 'at', ARGV[6], 'seq', start, 'seqEpoch', id,
  'viewers', 0, 'leaders', 0, 'version', start, 'versionEpoch', id, 'ended', '')
return { 1, rearm() }
