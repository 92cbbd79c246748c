-- act.lua: apply a leader action, record the activity, move the alarm and publish the stamped
-- frame as "<version> f <frame>" for every replica to relay. A control ref at or below the
-- session's last applied one is a repeat (re-sent after a re-attach) and changes nothing. An
-- action the room's state refuses (a mark past the limit, a loop past the video's end, a mark
-- formation where there is no mark) changes nothing either, not even the session's last ref.
-- KEYS, ARGV[1..4]  see lib.lua
-- ARGV[5]  kind: sync, formation, mark, reload, loop or markFormation
-- ARGV[6]  the stamped frame to publish (opaque bytes)
-- ARGV[7]  the acting session's id
-- ARGV[8]  the action's control ref (0: none, never a repeat)
-- ARGV[9..]  sync: playing (0/1), positionMs, rate (hundredths), count-in beats, count-in bpm
--              (0 0: none) |
--            formation: JSON | mark: the mark (opaque bytes), positionMs, the marks limit |
--            reload: has video (0/1), title, durationMs | loop: startMs, endMs (0 0: clear) |
--            markFormation: positionMs, JSON ("": none)
-- Returns  {-1} no room; {-2, reason} ended; {-3} the session is not open (its lease ended);
--          {-4, why, n} refused by the room's state, nothing applied: why is 'marks' (the room
--          holds n marks already), 'loop' (the video is n ms long) or 'nomark' (no mark at that
--          position); {2} a repeat, not applied again; {1, head} applied.
local kind = ARGV[5]
if type(kind) ~= 'string' or type(ARGV[6]) ~= 'string' or type(ARGV[7]) ~= 'string' or not nat(ARGV[8])
    or type(ARGV[9]) ~= 'string'
    or (kind == 'sync' and ((ARGV[9] ~= '0' and ARGV[9] ~= '1') or not nat(ARGV[10]) or not nat(ARGV[11])
      or not nat(ARGV[12]) or not nat(ARGV[13])))
    or (kind == 'mark' and (not nat(ARGV[10]) or not nat(ARGV[11])))
    or (kind == 'reload' and ARGV[9] == '1' and (type(ARGV[10]) ~= 'string' or not nat(ARGV[11])))
    or (kind == 'loop' and (not nat(ARGV[9]) or not nat(ARGV[10])))
    or (kind == 'markFormation' and (not nat(ARGV[9]) or type(ARGV[10]) ~= 'string')) then
  return redis.error_reply('ERR act.lua: want a kind, a frame, a session, a ref and the values of the kind')
end
local shut = closed()
if shut then
  return shut
end
if redis.call('HEXISTS', KEYS[3], ARGV[7]) == 0 then
  return { -3 }
end
if ARGV[8] ~= '0' and tonumber(redis.call('HGET', KEYS[9], ARGV[7]) or '0') >= tonumber(ARGV[8]) then
  return { 2 }
end
if kind == 'mark' then
  local n = redis.call('LLEN', KEYS[5])
  if n >= tonumber(ARGV[11]) then
    return { -4, 'marks', n }
  end
elseif kind == 'loop' then
  local dur = tonumber(redis.call('HGET', KEYS[1], 'durationMs') or '0')
  if tonumber(ARGV[10]) > dur then
    return { -4, 'loop', dur }
  end
elseif kind == 'markFormation' then
  if redis.call('HEXISTS', KEYS[10], ARGV[9]) == 0 then
    return { -4, 'nomark', 0 }
  end
end
if ARGV[8] ~= '0' then
  redis.call('HSET', KEYS[9], ARGV[7], ARGV[8])
end
redis.call('HSET', KEYS[1], 'lastActivity', ARGV[3])
if kind == 'sync' then
  redis.call('HSET', KEYS[1], 'playing', ARGV[9], 'positionMs', ARGV[10], 'at', ARGV[3], 'rate', ARGV[11],
    'countBeats', ARGV[12], 'countBpm', ARGV[13])
elseif kind == 'formation' then
  redis.call('HSET', KEYS[1], 'formation', ARGV[9])
elseif kind == 'mark' then
  redis.call('RPUSH', KEYS[5], ARGV[9])
  redis.call('HSETNX', KEYS[10], ARGV[10], '')
elseif kind == 'reload' and ARGV[9] == '1' then
  -- Another video: its playback starts over, and the old video's marks and loop go.
  redis.call('HSET', KEYS[1], 'title', ARGV[10], 'durationMs', ARGV[11], 'playing', 0,
    'positionMs', 0, 'at', ARGV[3], 'countBeats', 0, 'countBpm', 0, 'loopStart', 0, 'loopEnd', 0)
  redis.call('DEL', KEYS[5], KEYS[10])
elseif kind == 'loop' then
  redis.call('HSET', KEYS[1], 'loopStart', ARGV[9], 'loopEnd', ARGV[10])
elseif kind == 'markFormation' then
  redis.call('HSET', KEYS[10], ARGV[9], ARGV[10])
end
local v = next_version()
redis.call('PUBLISH', ARGV[2], v .. ' f ' .. ARGV[6])
return { 1, rearm() }
