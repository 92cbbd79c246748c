package redistest

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// FailScriptsAfterRun is a go-redis hook that fails every script call (EVAL, EVALSHA and their
// read-only forms) with Err after Redis has run it, alone or in a pipeline: the write is in
// Redis and the caller is told it failed, as when a durability wait times out after the
// script (pkg/redisx's ErrOutcomeUnknown). Add it to a client of a store under test to check
// what a write whose outcome is unknown leaves behind (what is published, what a repeat gets).
type FailScriptsAfterRun struct{ Err error }

func (FailScriptsAfterRun) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h FailScriptsAfterRun) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil && isScriptCall(cmd) {
			cmd.SetErr(h.Err)
			return h.Err
		}
		return err
	}
}

func (h FailScriptsAfterRun) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if cmd.Err() == nil && isScriptCall(cmd) {
				cmd.SetErr(h.Err)
				err = h.Err
			}
		}
		return err
	}
}

func isScriptCall(cmd redis.Cmder) bool {
	return strings.HasPrefix(strings.ToLower(cmd.Name()), "eval")
}
