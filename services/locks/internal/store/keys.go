package store

import (
	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/redisx"
)

// lockKeys are the keys one lock script touches, in the order of KEYS in lib.lua. All of them
// start with the resource's shard tag "<prefix>:{locks:<shard>}", which is the first hash tag in
// every key and so alone decides the Redis Cluster slot: one script can change a lock, its
// queue, the fencing counter and the alarm set atomically. The resource itself follows as
// redisx.Tag(resource), escaped, so a name holding "{", "}" or "%" can neither move a key to
// another slot nor make two names share a key.
type lockKeys struct {
	shard int
	// lock is "<tag>:lock:{<resource>}", the holder's hash.
	lock string
	// queue is "<tag>:queue:{<resource>}", the waiters' list.
	queue string
	// fence is "<tag>:fence", the shard's fencing counter. One counter per shard keeps tokens
	// growing per resource (they grow per shard) without keeping a key per resource forever;
	// it relies on the shard count staying fixed, as the alarm queue already does.
	fence string
	// alarms is the shard's alarm sorted set (member = the resource, unescaped).
	alarms string
}

func keysOf(q *alarm.Queue, resource string) lockKeys {
	shard := q.ShardOf(resource)
	k := q.Keys(shard)
	name := redisx.Tag(resource)
	return lockKeys{
		shard:  shard,
		lock:   k.Tag + ":lock:" + name,
		queue:  k.Tag + ":queue:" + name,
		fence:  k.Tag + ":fence",
		alarms: k.Alarms,
	}
}

func (k lockKeys) list() []string { return []string{k.lock, k.queue, k.fence, k.alarms} }

// grantChannel is where lock scripts tell a service replica that one of its waiting calls got
// a lock: "<prefix>:locks:grants:<replica>".
func grantChannel(prefix, replica string) string { return prefix + ":locks:grants:" + replica }
