package store

import "github.com/vigil-dev/vigil/pkg/alarm"

// Every key of a reservation lives under its alarm shard's hash tag ("<prefix>:{reservations:<n>}",
// pkg/alarm's layout), so one script can change a reservation and its alarm together on one
// Redis or a Redis Cluster. Reservation ids follow the seed's slug rule (input.Slug), so they
// hold no brace and need no escaping inside a key.

// keys is every key the store uses, built from the alarm queue's shard layout.
type keys struct{ q *alarm.Queue }

// reservation is the hash of reservation id: status, createdAt, expiresAt, expiredAt,
// expirationCount.
func (k keys) reservation(id string) string { return k.q.KeysOf(id).Tag + ":res:" + id }

// alarms is the alarm sorted set of the shard reservation id lives in.
func (k keys) alarms(id string) string { return k.q.KeysOf(id).Alarms }

// one is the KEYS of a single-reservation script: its hash, then its shard's alarm set.
func (k keys) one(id string) []string { return []string{k.reservation(id), k.alarms(id)} }
