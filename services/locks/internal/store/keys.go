package store

import "github.com/vigil-dev/vigil/pkg/alarm"

// lockKeys are the keys one lock script touches, all under the resource's shard hash tag
// "{locks:<shard>}", in the order of KEYS in lib.lua.
type lockKeys struct {
	shard int
	// lock is "<tag>:lock:<resource>", the holder's hash.
	lock string
	// queue is "<tag>:queue:<resource>", the waiters' list.
	queue string
	// fence is "<tag>:fence", the shard's fencing counter. One counter per shard keeps tokens
	// growing per resource (they grow per shard) without keeping a key per resource forever;
	// it relies on the shard count staying fixed, as the alarm queue already does.
	fence string
	// alarms is the shard's alarm sorted set.
	alarms string
}

func keysOf(q *alarm.Queue, resource string) lockKeys {
	shard := q.ShardOf(resource)
	k := q.Keys(shard)
	return lockKeys{
		shard:  shard,
		lock:   k.Tag + ":lock:" + resource,
		queue:  k.Tag + ":queue:" + resource,
		fence:  k.Tag + ":fence",
		alarms: k.Alarms,
	}
}

func (k lockKeys) list() []string { return []string{k.lock, k.queue, k.fence, k.alarms} }

// grantChannel is where lock scripts tell a service replica that one of its waiting calls got
// a lock: "<prefix>:locks:grants:<replica>".
func grantChannel(prefix, replica string) string { return prefix + ":locks:grants:" + replica }
