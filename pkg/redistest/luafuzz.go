package redistest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// FuzzScript fuzzes the argument checks of one Lua script against real Redis. Each input is
// an ARGV list (one string, arguments separated by NUL bytes); the script runs on numKeys keys
// of one hash tag under a fresh prefix, with whatever state earlier inputs left there.
//
// The script may answer anything, or refuse with an error reply of its own
// (redis.error_reply). It fails the fuzz target when Lua itself faults (comparing nil, calling
// a Redis command with an argument it rejects: errors Redis tags "@user_script"), because a
// script that faults halfway keeps the writes it already made. Scripts check their arguments
// before their first write.
//
// seeds are typical ARGV lists; give the ones the store really sends.
func FuzzScript(f *testing.F, src string, numKeys int, seeds ...[]string) {
	f.Helper()
	c, prefix := Client(f)
	keys := make([]string, numKeys)
	for i := range keys {
		keys[i] = prefix + ":{fuzz}:k" + string(rune('a'+i))
	}
	script := redis.NewScript(src)
	for _, s := range seeds {
		f.Add(strings.Join(s, "\x00"))
	}
	f.Fuzz(func(t *testing.T, packed string) {
		argv := strings.Split(packed, "\x00")
		if len(argv) > 64 {
			argv = argv[:64]
		}
		args := make([]any, len(argv))
		for i, a := range argv {
			args[i] = a
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := script.Run(ctx, c, keys, args...).Err()
		if err != nil && !errors.Is(err, redis.Nil) && IsScriptFault(err) {
			t.Fatalf("ARGV %q: the script faulted instead of checking its arguments: %v", argv, err)
		}
	})
}

// IsScriptFault reports whether err is Lua faulting inside a script (a runtime error, or a
// Redis command refusing an argument), rather than an error reply the script chose to return.
func IsScriptFault(err error) bool {
	return err != nil && strings.Contains(err.Error(), "user_script")
}
