-- append.lua: gives a message the room's next id and keeps it in the room's log (trimmed to
-- the configured length), in one atomic step, so the log and the sequence never disagree. It
-- does not publish: it returns the payload, which the store publishes once the call succeeded
-- (after the durability wait), so no subscriber sees a message a failover then loses. A post
-- repeated with the same idempotency key is stored once.
--
-- Ids follow one another (1, 2, ...) while the room's data stays on one primary's history. A
-- primary that was promoted, or restarted from its files, may have lost the tail of what was
-- handed out, and its counter went back with it; so a room's first post under a new
-- replication id starts from max(counter + 1, Redis TIME in microseconds), above every id
-- handed out before (as long as the new primary's clock is not behind the old one's by more
-- than the failover took), and below 2^53 until the year 2255. Readers take the jump as a gap
-- and read the log, which holds nothing in it. A room the new primary does not know at all
-- starts from 1 again: only the durability wait (replica) covers a room lost whole.
--
-- KEYS[1] the room's log: a stream, entry id "<n>-0", one field "m" = the encoded message
-- KEYS[2] the room's sequence counter: the last id given
-- KEYS[3] the post's idempotency key (read and written only when ARGV[4] is not "0")
-- KEYS[4] the room's epoch: the replication id of the primary that gave the last id
-- ARGV[1] the encoded message, without its id
-- ARGV[2] how many messages the log keeps (exact MAXLEN)
-- ARGV[3] the room's channel
-- ARGV[4] how long to remember the idempotency key, in ms; "0" when the post has none
-- Returns {id, 0, channel, payload} for a new message (the store publishes payload on
-- channel), or {id, 1, channel, payload} for a repeated post: the first post's id, and its
-- payload again while the log keeps it ({id, 1} once it does not).
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
local function int(s) return type(s) == 'string' and #s <= 16 and (s == '0' or s:match('^%-?[1-9]%d*$') ~= nil) end
local function nat(s) return int(s) and s:sub(1, 1) ~= '-' end
if type(ARGV[1]) ~= 'string' or not nat(ARGV[2]) or type(ARGV[3]) ~= 'string' or not nat(ARGV[4]) then
  return redis.error_reply('ERR append.lua: want a message, a length, a channel and a TTL')
end
if ARGV[4] ~= "0" then
  local seen = redis.call("GET", KEYS[3])
  if seen then
    -- Published again: the first post's publish may not have gone out (its service stopped
    -- after the write); a subscriber that has the message drops the copy by its id.
    local kept = redis.call("XRANGE", KEYS[1], seen .. "-0", seen .. "-0")
    if kept[1] then
      return {tonumber(seen), 1, ARGV[3], seen .. ":" .. kept[1][2][2]}
    end
    return {tonumber(seen), 1}
  end
end
local id = tonumber(redis.call("GET", KEYS[2]) or "0") + 1
local epoch = string.match(redis.call("INFO", "replication"), "master_replid:(%w+)") or ""
if redis.call("GET", KEYS[4]) ~= epoch then
  if id > 1 then
    local t = redis.call("TIME")
    id = math.max(id, tonumber(t[1]) * 1000000 + tonumber(t[2]))
  end
  redis.call("SET", KEYS[4], epoch)
end
local ids = string.format("%d", id)
redis.call("SET", KEYS[2], ids)
redis.call("XADD", KEYS[1], "MAXLEN", ARGV[2], ids .. "-0", "m", ARGV[1])
if ARGV[4] ~= "0" then
  redis.call("SET", KEYS[3], ids, "PX", ARGV[4])
end
return {id, 0, ARGV[3], ids .. ":" .. ARGV[1]}
