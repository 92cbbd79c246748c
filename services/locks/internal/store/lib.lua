-- lib.lua: the lock state machine shared by every lock script; store.go prepends it to each,
-- after pkg/alarm's contract (alarm_set, alarm_clear: the alarm set's score rules live there).
-- Every script gets the same first KEYS and ARGV:
-- KEYS[1]  the lock (hash: owner, token, exp = lease end in ms, wid = waiter id it was granted to)
-- KEYS[2]  the resource's waiter queue (list of entries, oldest first; see entry below)
-- KEYS[3]  the shard's fencing counter (string; it only grows, never reset or deleted: see grant)
-- KEYS[4]  the shard's alarm sorted set (member = resource, score = lease end in whole ms)
-- ARGV[1]  the resource
-- ARGV[2]  now, in ms
-- A waiter entry is "deadline\nttl\nwid\nchannel\nowner": the waiter's deadline (ms), the
-- lease it asks for (ms), its id, the channel its service listens on, and its owner last (an
-- owner is printable, so it holds no newline).
-- Every script's reply ends with the grant notices to publish, {channel, payload, ...}: the
-- script does not PUBLISH itself, so a waiter hears of a grant only once the store's call
-- succeeded (after the durability WAIT), never of one a failover then loses.
-- A lock is held while exp > now. Past exp it is free, whether or not its alarm has fired:
-- every script first settles it, which hands it to the first live waiter or deletes it.
local lock_key, queue_key, fence_key, alarms_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local resource = ARGV[1]
local now = tonumber(ARGV[2])
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
local function int(s) return type(s) == 'string' and #s <= 16 and (s == '0' or s:match('^%-?[1-9]%d*$') ~= nil) end
local function nat(s) return int(s) and s:sub(1, 1) ~= '-' end
if type(ARGV[1]) ~= 'string' or not int(ARGV[2]) then
  return redis.error_reply('ERR lock script: want a resource and a time in ms')
end
-- armed is the lease end this script set as the resource's alarm when it became its shard's
-- earliest and is due within wake_within ms (0 otherwise, or when the alarm was cleared since).
-- wake_within is store.Options.WakeWithin, which New puts in front of this file.
local armed = 0
-- quiet_channel: a grant to a waiter on this channel is not published, because the calling
-- replica answers that waiter itself from the script's reply (release.lua sets it).
local quiet_channel = false
-- notices are the grants to publish, {channel, payload, ...}; every script returns them last.
local notices = {}

local function arm(exp)
  if alarm_set_before(alarms_key, resource, exp, now + wake_within) == 1 then
    armed = exp
  else
    armed = 0
  end
end

-- reply is a script's reply r with the grant notices to publish appended.
local function reply(r)
  r[#r + 1] = notices
  return r
end

-- wake is the alarm to wake the shard's scheduler for: the lease end this script armed when
-- that made it the shard's earliest alarm, else 0.
local function wake()
  return armed
end

-- next_token is a new fencing token: above every token the counter has handed out, and at
-- least the server's TIME in microseconds. A failover that loses the tail of the replication
-- stream sets the counter back; the clock does not go back with it, so the next token still
-- exceeds every token handed out before, as long as the new primary's clock is not behind the
-- old one's by more than the failover took (docs/LOCKS.md). A microsecond clock stays below
-- 2^53 (a JSON-safe integer) until the year 2255.
local function next_token()
  local t = redis.call('TIME')
  local token = math.max(tonumber(redis.call('GET', fence_key) or '0') + 1,
    tonumber(t[1]) * 1000000 + tonumber(t[2]))
  redis.call('SET', fence_key, string.format('%d', token))
  return token
end

-- grant gives the lock to owner for ttl ms with a new fencing token.
local function grant(owner, ttl, wid)
  local token = next_token()
  local exp = now + ttl
  redis.call('HSET', lock_key, 'owner', owner, 'token', string.format('%d', token), 'exp', string.format('%d', exp), 'wid', wid)
  arm(exp)
  return token, exp
end

-- handoff frees the lock: the first waiter whose deadline has not passed gets it (and its
-- service is told on its channel); stale waiters are dropped. Returns the new holder, if any.
local function handoff()
  while true do
    local entry = redis.call('LPOP', queue_key)
    if not entry then
      break
    end
    local deadline, ttl, wid, channel, owner = string.match(entry, '^(%d+)\n(%d+)\n([^\n]+)\n([^\n]*)\n(.*)$')
    if deadline and tonumber(deadline) > now then
      local token, exp = grant(owner, tonumber(ttl), wid)
      if channel ~= quiet_channel then
        notices[#notices + 1] = channel
        notices[#notices + 1] = wid .. '\n' .. string.format('%d', token) .. '\n' .. string.format('%d', exp)
      end
      return owner, token, exp, wid
    end
  end
  redis.call('DEL', lock_key)
  alarm_clear(alarms_key, resource)
  armed = 0
  return nil
end

-- settle returns the holder (owner, token, exp, wid) after handing off a lock past its expiry;
-- nil when the lock is free. A free lock has no waiters: only acquire.lua queues, and only
-- while the lock is held, and handoff deletes the lock only once its queue is empty.
local function settle()
  local cur = redis.call('HMGET', lock_key, 'owner', 'token', 'exp', 'wid')
  if not cur[1] then
    return nil
  end
  if tonumber(cur[3]) > now then
    return cur[1], tonumber(cur[2]), tonumber(cur[3]), cur[4]
  end
  return handoff()
end

