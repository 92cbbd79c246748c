package store

// Every key and the channel of a room carry the hash tag {<prefix>:chat:<room>}, so each script
// touches one slot and runs unchanged on Redis Cluster.

// roomKeys are the Redis names of one room.
type roomKeys struct {
	// log is the stream of the room's kept messages; entry id "<n>-0", field "m".
	log string
	// seq is the room's last given message id (INCR).
	seq string
	// channel is where each new message is published, as "<id>:<encoded message>".
	channel string
}

func (s *Store) keys(room string) roomKeys {
	tag := "{" + s.prefix + ":chat:" + room + "}"
	return roomKeys{log: tag + ":log", seq: tag + ":seq", channel: tag + ":live"}
}

// postKey remembers a post's idempotency key, holding the id it was stored under.
func (s *Store) postKey(room, postID string) string {
	return "{" + s.prefix + ":chat:" + room + "}:post:" + postID
}
