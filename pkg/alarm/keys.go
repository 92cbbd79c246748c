package alarm

import (
	"hash/fnv"
	"strconv"
)

// Every key of shard s of namespace ns carries the hash tag {ns:s}, so one Lua script can touch
// an object's state and its shard's alarm set together, on one Redis or on a Redis Cluster.

// ShardKeys are the queue's keys for one shard.
type ShardKeys struct {
	// Tag is "<prefix>:{<ns>:<shard>}"; domain stores build their object keys on it.
	Tag string
	// Alarms is the sorted set of alarms: member = object id, score = due time in ms.
	Alarms string
	// Attempts counts attempts per object id while its alarm is leased or retrying, from its
	// second claim on (an alarm in flight without a count is on its first attempt).
	Attempts string
	// InFlight counts the shard's alarms claimed and not yet acknowledged, or waiting for a
	// retry (a string; absent at zero): claim.lua adds its fresh members, and ack.lua and
	// retry.lua take off each flight that ends. A late ack of an alarm that another scheduler
	// re-claimed after the lease and acknowledged first takes it off twice; the count never
	// goes below zero, so it is right again once the shard has nothing in flight.
	InFlight string
	// Dead is the dead-letter sorted set: member = object id, score = when it died (ms).
	Dead string
	// DeadInfo holds each dead letter's last error and attempt count as JSON.
	DeadInfo string
}

func shardKeys(prefix, ns string, shard int) ShardKeys {
	tag := prefix + ":{" + ns + ":" + strconv.Itoa(shard) + "}"
	return ShardKeys{
		Tag:      tag,
		Alarms:   tag + ":alarms",
		Attempts: tag + ":attempts",
		InFlight: tag + ":inflight",
		Dead:     tag + ":dead",
		DeadInfo: tag + ":deadinfo",
	}
}

// wakeChannel carries early-wake hints: the message is the shard number whose head moved earlier.
func wakeChannel(prefix, ns string) string { return prefix + ":" + ns + ":wake" }

// shardOf maps an object id to its shard with FNV-1a; stable across processes and versions.
func shardOf(id string, shards int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % uint32(shards))
}
