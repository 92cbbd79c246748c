-- presence_lib.lua: what every presence script shares; prepended to each of them at
-- construction. A member is a user id, present while one of their sessions (sockets) is open;
-- a session is open until it exits or its lease ends. Every presence script takes:
-- KEYS[1] the room's members: hash, user id -> "<arrival version> <since ms> <username>"
-- KEYS[2] the room's member sessions: hash, user id -> open sessions
-- KEYS[3] the room's sessions: sorted set, session id -> lease end (ms)
-- KEYS[4] the room's session info: hash, session id -> "<holder>\t<user id>" (holder: the
--         token of the stream that entered or re-attached it last)
-- KEYS[5] the room's presence version: each arrival and departure adds one (next_version)
-- KEYS[6] the replication id of the primary that gave the last presence version
-- ARGV[1] the room's channel
-- ARGV[2] now (ms): sessions whose lease end is at or before it are closed first
-- Each arrival announces "p<version>\tj\t<user id>\t<since>\t<username>" and each departure
-- "p<version>\tl\t<user id>" (a tab is a control character, which neither a user id nor a
-- username holds). Every script's reply ends with its announcements, in order: the store
-- publishes them on the channel once the call succeeded (after the durability wait), so no
-- subscriber sees a change a failover then loses.
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
local function int(s) return type(s) == 'string' and #s <= 16 and (s == '0' or s:match('^%-?[1-9]%d*$') ~= nil) end
local function nat(s) return int(s) and s:sub(1, 1) ~= '-' end
local function word(s) return type(s) == 'string' and s ~= '' and not s:find('\t', 1, true) end
if type(ARGV[1]) ~= 'string' or not nat(ARGV[2]) then
  return redis.error_reply('ERR presence script: want a channel and a time')
end

-- announced are this script's presence changes, in order, for the store to publish.
local announced = {}

-- reply is a script's reply r with its announcements appended.
local function reply(r)
  r[#r + 1] = announced
  return r
end

-- next_version is the room's next presence version. Versions follow one another while the room
-- stays on one primary's history; a primary that was promoted (or restarted from its files) may
-- have lost the last ones, and its count went back with them, so the first version under
-- another replication id than the last one's is max(version + 1, Redis TIME in microseconds):
-- above every version given before, as append.lua does for message ids. A stream skips changes
-- at or below the version it has, so a version given twice would be a change skipped.
local function next_version()
  local v = redis.call('INCR', KEYS[5])
  local epoch = string.match(redis.call('INFO', 'replication'), 'master_replid:(%w+)') or ''
  if redis.call('GET', KEYS[6]) ~= epoch then
    redis.call('SET', KEYS[6], epoch)
    if v > 1 then
      local t = redis.call('TIME')
      v = math.max(v, tonumber(t[1]) * 1000000 + tonumber(t[2]))
      redis.call('SET', KEYS[5], string.format('%d', v))
    end
  end
  return string.format('%d', v)
end

-- split reads a session's info: its holder and its user id.
local function split(info)
  local tab = info:find('\t', 1, true)
  if not tab then
    return '', info
  end
  return info:sub(1, tab - 1), info:sub(tab + 1)
end

-- depart uncounts one closed session of user; their last one removes them and announces the
-- departure.
local function depart(user)
  if redis.call('HINCRBY', KEYS[2], user, -1) > 0 then
    return
  end
  redis.call('HDEL', KEYS[2], user)
  redis.call('HDEL', KEYS[1], user)
  local v = next_version()
  announced[#announced + 1] = 'p' .. v .. '\tl\t' .. user
end

-- drop closes one session; returns 1 when it was open.
local function drop(session)
  local info = redis.call('HGET', KEYS[4], session)
  if not info then
    return 0
  end
  local _, user = split(info)
  redis.call('HDEL', KEYS[4], session)
  redis.call('ZREM', KEYS[3], session)
  depart(user)
  return 1
end

-- sweep closes every session whose lease ended.
local function sweep()
  local dead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', ARGV[2])
  for i = 1, #dead do
    drop(dead[i])
  end
end

