-- release.lua: free the lock if the caller holds it, handing it to the next live waiter.
-- KEYS[1..4], ARGV[1..2]  as in lib.lua
-- ARGV[3]  owner
-- Returns  {released, wake}: released 1 or 0 (the caller did not hold it); wake as in lib.lua.
local holder = settle()
if holder ~= ARGV[3] then
  return {0, wake()}
end
handoff()
return {1, wake()}
