package redisx

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Publisher returns the client that publishes the messages of the slot key belongs to. On a
// Cluster that is the slot's master: PUBLISH names no key, so go-redis sends it to any node,
// and two messages that leave from two nodes reach a subscriber over two cluster-bus links,
// which keep no order between them. Publishing every message of one channel from the master
// of one key keeps them in the order they were sent. Elsewhere it is c itself.
func Publisher(ctx context.Context, c redis.UniversalClient, key string) (redis.Cmdable, error) {
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.MasterForKey(ctx, key)
	}
	return c, nil
}
