-- lib.lua: the alarm contract for domain scripts. pkg/alarm's NewScript puts it in front of a
-- domain script, so a script that changes an object and its alarm in one step sets and clears
-- the alarm the way the queue expects, and the score rules live only here:
--   * a domain sets whole-millisecond due times; a fractional score means "leased by a claim
--     or waiting for a retry" and belongs to the queue (claim.lua, ack.lua, retry.lua);
--   * setting an alarm replaces the object's one alarm, whatever its score was, so an alarm
--     re-armed while it is being handled survives the ack of the old firing.
-- The due time must already be checked as an integer (alarm_int) before the script's first
-- write: a script that faults halfway keeps its writes.

-- alarm_int reports whether s is an integer argument of at most 16 digits (a due time in ms).
local function alarm_int(s) return type(s) == 'string' and #s <= 16 and s:match('^%-?%d+$') ~= nil end

-- alarm_set sets (replaces) object id's alarm in the shard's alarm set key to fire at due (whole
-- ms). Returns 1 when it is now the earliest alarm of its shard (the caller wakes the
-- scheduler), else 0.
local function alarm_set(key, id, due)
  redis.call('ZADD', key, due, id)
  local head = redis.call('ZRANGE', key, 0, 0)
  if head[1] == id then
    return 1
  end
  return 0
end

-- alarm_set_before sets object id's alarm as alarm_set does, but looks at the shard's head only
-- when due is before soon (whole ms): it returns 1 when due < soon and the alarm is now the
-- earliest of its shard, else 0. A caller that wakes the scheduler only for alarms due soon
-- (a later one is found by the scheduler's capped sleep) spares that lookup for the rest.
local function alarm_set_before(key, id, due, soon)
  if due < soon then
    return alarm_set(key, id, due)
  end
  redis.call('ZADD', key, due, id)
  return 0
end

-- alarm_clear removes object id's alarm, leased or not; its ack then finds nothing to remove.
local function alarm_clear(key, id)
  redis.call('ZREM', key, id)
end

-- alarm_clear_all removes the alarms of every object id in the list ids, in variadic calls of
-- at most a thousand (unpack takes at most a few thousand values: Lua's C stack).
local function alarm_clear_all(key, ids)
  for i = 1, #ids, 1000 do
    redis.call('ZREM', key, unpack(ids, i, math.min(i + 999, #ids)))
  end
end

-- alarm_due is object id's alarm score as Redis returns it (false when it has none). A leased
-- or retrying alarm has a fractional score: readers floor it to whole ms.
local function alarm_due(key, id)
  return redis.call('ZSCORE', key, id)
end
