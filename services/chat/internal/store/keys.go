package store

import "github.com/vigil-dev/vigil/pkg/redisx"

// Every key and the channel of a room carry the hash tag redisx.Tag("<prefix>:chat:<room>"), so
// each script touches one slot and runs unchanged on Redis Cluster, whatever the room's name
// holds ("{", "}" and "%" are escaped inside the tag).

// roomKeys are the Redis names of one room.
type roomKeys struct {
	// log is the stream of the room's kept messages; entry id "<n>-0", field "m".
	log string
	// seq is the room's last given message id (append.lua).
	seq string
	// epoch is the replication id of the primary that gave the last id (append.lua).
	epoch string
	// channel is where each new message is published, as "<id>:<encoded message>", and each
	// presence change, as "p<version>\t…" (presence_lib.lua).
	channel string
	// presence are the keys of the room's presence, in the order of KEYS in presence_lib.lua:
	// members, member sessions, sessions, session info, presence version, its epoch.
	presence []string
}

func (s *Store) keys(room string) roomKeys {
	tag := redisx.Tag(s.prefix + ":chat:" + room)
	return roomKeys{log: tag + ":log", seq: tag + ":seq", epoch: tag + ":epoch", channel: tag + ":live",
		presence: []string{tag + ":members", tag + ":msessions", tag + ":sessions", tag + ":sinfo", tag + ":pversion", tag + ":pepoch"}}
}

// postKey remembers a post's idempotency key, holding the id it was stored under.
func (s *Store) postKey(room, postID string) string {
	return redisx.Tag(s.prefix+":chat:"+room) + ":post:" + postID
}
