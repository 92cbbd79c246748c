package redistest

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ForgetScriptsAfterLoad makes Redis forget every script (SCRIPT FLUSH, from a client of its
// own) right after each SCRIPT LOAD that c sends: the window between loading scripts that a
// pipeline found missing and re-sending its calls, which another client's SCRIPT FLUSH or a
// Redis restart can hit. It returns how many times it flushed. c is a single server's client:
// a cluster client loads scripts through its nodes' clients, which this hook does not see.
func ForgetScriptsAfterLoad(t testing.TB, c *redis.Client) *atomic.Int64 {
	t.Helper()
	o := c.Options()
	other := redis.NewClient(&redis.Options{Addr: o.Addr, Username: o.Username, Password: o.Password, DB: o.DB, TLSConfig: o.TLSConfig})
	t.Cleanup(func() { _ = other.Close() })
	h := &forgetAfterLoad{flush: func(ctx context.Context) error { return other.ScriptFlush(ctx).Err() }}
	c.AddHook(h)
	return &h.flushes
}

type forgetAfterLoad struct {
	flush   func(ctx context.Context) error
	flushes atomic.Int64
}

func (*forgetAfterLoad) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *forgetAfterLoad) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		if len(args) < 2 || cmd.Name() != "script" {
			return err
		}
		if sub, _ := args[1].(string); !strings.EqualFold(sub, "load") {
			return err
		}
		if ferr := h.flush(ctx); ferr != nil {
			return ferr
		}
		h.flushes.Add(1)
		return err
	}
}

func (*forgetAfterLoad) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
