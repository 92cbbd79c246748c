-- lib.lua: helpers shared by the room scripts; prepended to each of them at construction,
-- after pkg/alarm's Lua contract (alarm.NewScript), which sets and clears the room's alarm.
-- Every room script takes the same KEYS and first ARGV:
-- KEYS[1]  the room's state hash
-- KEYS[2]  its sessions: sorted set, session id -> lease end (ms)
-- KEYS[3]  its session info: hash, session id -> "<role>:<client id>" (role l or v)
-- KEYS[4]  its viewer refs: hash, client id -> open viewer sessions with that id
-- KEYS[5]  its marks: list of marks (opaque bytes, oldest first)
-- KEYS[6]  its shard's alarm sorted set (member = room code, score = due ms)
-- KEYS[7]  its tombstone (set when its storage is deleted, so a late join cannot revive it)
-- KEYS[8]  its attachments: hash, session id -> the token of the stream the session is attached
--          to now (a re-attach replaces it; a close from an older stream then changes nothing)
-- KEYS[9]  its control refs: hash, session id -> the last control ref applied for it
-- KEYS[10] its marks' positions: hash, positionMs -> that position's formation (JSON; "": none)
-- KEYS[11] its people: hash, "<role>:<client id>" -> "<since ms> <name>" (a person is present
--          while one of their sessions is open)
-- KEYS[12] its people's sessions: hash, "<role>:<client id>" -> open sessions
-- ARGV[1]  room code
-- ARGV[2]  the room's pub/sub channel
-- ARGV[3]  now (ms)
-- ARGV[4]  idle TTL (ms)
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
local function int(s) return type(s) == 'string' and #s <= 16 and (s == '0' or s:match('^%-?[1-9]%d*$') ~= nil) end
local function nat(s) return int(s) and s:sub(1, 1) ~= '-' end
if type(ARGV[1]) ~= 'string' or type(ARGV[2]) ~= 'string' or not int(ARGV[3]) or not nat(ARGV[4]) then
  return redis.error_reply('ERR room script: want a code, a channel, a time and an idle TTL')
end

-- rearm sets the room's one alarm to the earlier of its inactivity deadline and its first
-- session lease end; returns its due time (ms) when that alarm is now its shard's head, else 0:
-- the caller wakes the scheduler only for a head due soon (a later one is found by the
-- scheduler's capped sleep anyway). The scripts return it as their `head`.
local function rearm()
  local due = tonumber(redis.call('HGET', KEYS[1], 'lastActivity')) + tonumber(ARGV[4])
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if first[2] and tonumber(first[2]) < due then
    due = tonumber(first[2])
  end
  if alarm_set(KEYS[6], ARGV[1], string.format('%d', due)) == 1 then
    return due
  end
  return 0
end

-- A room's counters (its event version, its occupancy seq for the Lobby) follow one another
-- while the room stays on one primary's history. A primary that was promoted (or restarted from
-- its files) may have lost the last values handed out, and the counter went back with them: a
-- reader that has seen them (the gateway skips versions it has seen; the Lobby drops a seq at
-- or below the one it applied) would drop the next ones as old. So the first increment of a
-- counter under another replication id than its last one's (kept in its epoch field) takes
-- max(value + 1, Redis TIME in microseconds): above every value given before (as long as the
-- new primary's clock is not behind the old one's by more than the failover took), and below
-- 2^53 (16 digits) until 2255. Each counter keeps its own epoch field: a script that bumps
-- both must jump both, whichever it bumps first.
local replid = nil
local function replication_id()
  if replid == nil then
    replid = string.match(redis.call('INFO', 'replication'), 'master_replid:(%w+)') or ''
  end
  return replid
end

-- count increments the counter field of the room's state hash, guarded by epoch_field as
-- above; returns its new value (a number).
local function count(field, epoch_field)
  local v = redis.call('HINCRBY', KEYS[1], field, 1)
  local id = replication_id()
  if redis.call('HGET', KEYS[1], epoch_field) ~= id then
    redis.call('HSET', KEYS[1], epoch_field, id)
    if v > 1 then
      local t = redis.call('TIME')
      v = math.max(v, tonumber(t[1]) * 1000000 + tonumber(t[2]))
      redis.call('HSET', KEYS[1], field, string.format('%d', v))
    end
  end
  return v
end

-- next_version is the room's next event version (a string).
local function next_version()
  return string.format('%d', count('version', 'versionEpoch'))
end

-- ended returns the room's end reason, or nil while it is open.
local function ended()
  local e = redis.call('HGET', KEYS[1], 'ended')
  if e and e ~= '' then
    return e
  end
  return nil
end

-- closed is what a script that acts on an open room (act, join, renew) answers when it cannot:
-- {-1} when there is no room, {-2, reason} once it ended; nil while it is open.
local function closed()
  if redis.call('EXISTS', KEYS[1]) == 0 then
    return { -1 }
  end
  local e = ended()
  if e then
    return { -2, e }
  end
  return nil
end

-- arrive counts a new session of the person info ("<role>:<client id>"); their first one
-- adds them to the people and publishes "<version> j <role>\t<client id>\t<since>\t<name>"
-- (a tab is a control character, which neither a client id nor a name holds).
local function arrive(info, name)
  if redis.call('HINCRBY', KEYS[12], info, 1) ~= 1 then
    return
  end
  redis.call('HSET', KEYS[11], info, ARGV[3] .. ' ' .. name)
  local v = next_version()
  redis.call('PUBLISH', ARGV[2], v .. ' j ' .. string.sub(info, 1, 1) .. '\t' .. string.sub(info, 3) .. '\t' .. ARGV[3] .. '\t' .. name)
end

-- depart uncounts a closed session of the person info; their last one removes them and
-- publishes "<version> l <role>\t<client id>".
local function depart(info)
  if redis.call('HINCRBY', KEYS[12], info, -1) > 0 then
    return
  end
  redis.call('HDEL', KEYS[12], info)
  redis.call('HDEL', KEYS[11], info)
  local v = next_version()
  redis.call('PUBLISH', ARGV[2], v .. ' l ' .. string.sub(info, 1, 1) .. '\t' .. string.sub(info, 3))
end

-- drop closes one session and updates the counts and the people; returns the viewers and
-- leaders deltas.
local function drop(id)
  local info = redis.call('HGET', KEYS[3], id)
  if not info then
    return 0, 0
  end
  depart(info)
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
  redis.call('HDEL', KEYS[8], id)
  redis.call('HDEL', KEYS[9], id)
  if string.sub(info, 1, 1) == 'l' then
    redis.call('HINCRBY', KEYS[1], 'leaders', -1)
    return 0, -1
  end
  local client = string.sub(info, 3)
  if redis.call('HINCRBY', KEYS[4], client, -1) <= 0 then
    redis.call('HDEL', KEYS[4], client)
    redis.call('HINCRBY', KEYS[1], 'viewers', -1)
    return -1, 0
  end
  return 0, 0
end

-- bump records an occupancy change: the next sequence number for the Lobby, and an occupancy
-- event "<version> o <viewers> <leaders>" for every replica. Returns the new seq (0: no change).
-- After a lost tail the seq jumps (count): the Lobby sees a gap, asks for a snapshot, and the
-- snapshot's seq is above every one it applied, so it takes it.
local function bump(dv, dl)
  if dv == 0 and dl == 0 then
    return 0
  end
  local seq = count('seq', 'seqEpoch')
  local v = next_version()
  local occ = redis.call('HMGET', KEYS[1], 'viewers', 'leaders')
  redis.call('PUBLISH', ARGV[2], v .. ' o ' .. occ[1] .. ' ' .. occ[2])
  return seq
end

