-- read.lua: reads part of a room's log together with the room's last id, in one atomic step,
-- so a reader knows exactly where live messages continue.
--
-- KEYS[1] the room's log (stream, entry id "<n>-0", field "m")
-- KEYS[2] the room's sequence counter
-- ARGV[1] "last" (the newest ARGV[3] messages), "after" (the oldest ARGV[3] with id > ARGV[2])
--         or "before" (the newest ARGV[3] with id < ARGV[2])
-- ARGV[2] the bound id (ignored for "last")
-- ARGV[3] the most messages to return
-- Returns {last id (0 when none), entries}: entries as XRANGE gives them, oldest first for
-- "after", newest first otherwise.
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
local function int(s) return type(s) == 'string' and #s <= 16 and (s == '0' or s:match('^%-?[1-9]%d*$') ~= nil) end
local function nat(s) return int(s) and s:sub(1, 1) ~= '-' end
if (ARGV[1] ~= 'last' and ARGV[1] ~= 'after' and ARGV[1] ~= 'before') or not nat(ARGV[2]) or not nat(ARGV[3])
    or (ARGV[1] == 'before' and ARGV[2] == '0') then
  return redis.error_reply('ERR read.lua: want last, after or before, an id (above 0 for before) and a count')
end
local seq = tonumber(redis.call("GET", KEYS[2]) or "0")
local entries
if ARGV[1] == "after" then
  entries = redis.call("XRANGE", KEYS[1], "(" .. ARGV[2] .. "-0", "+", "COUNT", ARGV[3])
elseif ARGV[1] == "before" then
  entries = redis.call("XREVRANGE", KEYS[1], "(" .. ARGV[2] .. "-0", "-", "COUNT", ARGV[3])
else
  entries = redis.call("XREVRANGE", KEYS[1], "+", "-", "COUNT", ARGV[3])
end
return {seq, entries}
