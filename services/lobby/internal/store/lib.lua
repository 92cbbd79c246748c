-- lib.lua: the argument checks every lobby script shares; prepended to each of them at
-- construction (New), so a script's own text starts after it.
-- int reports whether s is an integer argument of at most 16 characters, nat a non-negative one.
local function int(s) return type(s) == 'string' and #s <= 16 and (s == '0' or s:match('^%-?[1-9]%d*$') ~= nil) end
local function nat(s) return int(s) and s:sub(1, 1) ~= '-' end

-- log_change bumps the lobby's version (version_key) and appends the change (codes, space-
-- separated) to the change log (changes_key), each entry with the replication id of the primary
-- that wrote it ('e'). Versions follow one another while the lobby stays on one primary's
-- history. A primary that was promoted (or restarted from its files) may have lost the last
-- versions handed out, and its counter went back with them: a reader holding such a version
-- would take the lobby for unchanged when the counter reached it again. So the first change
-- under another replication id than the log's last entry's takes max(version + 1, Redis TIME
-- in microseconds), above every version given before (as long as the new primary's clock is
-- not behind the old one's by more than the failover took), below 2^53 until 2255; pollers see
-- the jump as a log that cannot say what changed, and reload. The change ids ('*') are the
-- primary's clock in ms, so they do not repeat either.
local function log_change(version_key, changes_key, codes)
  local v = redis.call('INCR', version_key)
  local epoch = string.match(redis.call('INFO', 'replication'), 'master_replid:(%w+)') or ''
  local last = redis.call('XREVRANGE', changes_key, '+', '-', 'COUNT', 1)[1]
  if last and v > 1 then
    local was = ''
    for i = 1, #last[2], 2 do
      if last[2][i] == 'e' then
        was = last[2][i + 1]
      end
    end
    if was ~= epoch then
      local t = redis.call('TIME')
      v = math.max(v, tonumber(t[1]) * 1000000 + tonumber(t[2]))
      redis.call('SET', version_key, string.format('%d', v))
    end
  end
  redis.call('XADD', changes_key, 'MAXLEN', '~', 10000, '*', 'v', string.format('%d', v), 'c', codes, 'e', epoch)
end
