package store

// Every key of a room starts with its alarm shard's hash tag "<prefix>:{room:<shard>}", which
// alone decides the Redis Cluster slot, so one script changes the room's state, its sessions
// and its alarm atomically. Room codes are slugs (input.Slug: lowercase letters, digits,
// hyphens), so they need no escaping inside a key. The keys, in the order of KEYS in lib.lua:
//
//	<tag>:<code>:state     hash: playback, formation, video, counts, seq, version, ended
//	<tag>:<code>:sessions  sorted set: session id -> lease end (ms)
//	<tag>:<code>:sinfo     hash: session id -> "<role>:<client id>"
//	<tag>:<code>:refs      hash: viewer client id -> open sessions
//	<tag>:<code>:marks     list: marks (wire form), oldest first
//	<tag>:alarms           the shard's alarm sorted set (pkg/alarm)
//	<tag>:<code>:gone      tombstone of a deleted room
//	<tag>:<code>:attach    hash: session id -> attachment token of its stream
//	<tag>:<code>:crefs     hash: session id -> last applied control ref
//	<tag>:<code>:mforms    hash: mark position -> its formation ("": none)
//	<tag>:<code>:people    hash: "<role>:<client id>" -> "<since ms> <name>"
//	<tag>:<code>:prefs     hash: "<role>:<client id>" -> open sessions
func (s *Store) keys(code string) []string {
	k := s.q.KeysOf(code)
	base := k.Tag + ":" + code
	return []string{base + ":state", base + ":sessions", base + ":sinfo", base + ":refs", base + ":marks", k.Alarms, base + ":gone",
		base + ":attach", base + ":crefs", base + ":mforms", base + ":people", base + ":prefs"}
}

// Channel is the pub/sub channel of a room's events: "<prefix>:room:events:<code>".
func (s *Store) Channel(code string) string { return s.prefix + ":room:events:" + code }
