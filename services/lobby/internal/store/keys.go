package store

// The lobby's keys all carry one hash tag, "{lobby}": the list is one index, and every script
// changes its columns, the version and the change log atomically (on Redis Cluster too). Room
// codes are slugs, so they are kept as hash fields and set members without escaping.
//
//	<prefix>:{lobby}:activity  sorted set: code -> last activity (ms)
//	<prefix>:{lobby}:info      hash: code -> name, video, created-at (newline-separated)
//	<prefix>:{lobby}:token     hash: code -> SHA-256 of the leader token
//	<prefix>:{lobby}:seq       hash: code -> last applied occupancy seq
//	<prefix>:{lobby}:viewers   hash: code -> viewers
//	<prefix>:{lobby}:leaders   hash: code -> leader sessions
//	<prefix>:{lobby}:version   counter bumped by every change
//	<prefix>:{lobby}:changes   capped stream of changed codes
//	<prefix>:{lobby}:pagekey   the HMAC key of page tokens (random, made once, shared by replicas)

// keys are the lobby's keys, all on one hash tag.
type keys struct {
	activity, info, token, seq, viewers, leaders, version, changes string
	pageKey                                                        string
}

func keysFor(prefix string) keys {
	tag := prefix + ":{lobby}"
	return keys{
		activity: tag + ":activity",
		info:     tag + ":info",
		token:    tag + ":token",
		seq:      tag + ":seq",
		viewers:  tag + ":viewers",
		leaders:  tag + ":leaders",
		version:  tag + ":version",
		changes:  tag + ":changes",
		pageKey:  tag + ":pagekey",
	}
}

func (k keys) all() []string {
	return []string{k.activity, k.info, k.token, k.seq, k.viewers, k.leaders, k.version, k.changes}
}
