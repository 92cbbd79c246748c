package redistest

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// LuaScript is one script for FuzzScripts: its source (with any shared prelude prepended, as
// the store does), how many KEYS it takes, and typical ARGV lists (the ones the store sends).
type LuaScript struct {
	Name  string
	Src   string
	Keys  int
	Seeds [][]string
}

// FuzzScripts fuzzes the argument checks of a store's Lua scripts against real Redis. Each
// input picks a script and an ARGV list (one string, arguments separated by NUL bytes); the
// script runs on its own keys of one hash tag under a fresh prefix, with whatever state
// earlier inputs left there.
//
// A script may answer anything, or refuse with an error reply of its own (redis.error_reply).
// The target fails when Lua itself faults (comparing nil, calling a Redis command with an
// argument it rejects: errors Redis tags "user_script"), because a script that faults halfway
// keeps the writes it already made. Scripts check their arguments before their first write.
func FuzzScripts(f *testing.F, scripts ...LuaScript) {
	f.Helper()
	c, prefix := Client(f)
	type prepared struct {
		s    *redis.Script
		keys []string
	}
	ps := make([]prepared, len(scripts))
	for i, sc := range scripts {
		keys := make([]string, sc.Keys)
		for k := range keys {
			keys[k] = prefix + ":{fuzz}:" + sc.Name + ":" + string(rune('a'+k))
		}
		ps[i] = prepared{s: redis.NewScript(sc.Src), keys: keys}
		for _, seed := range sc.Seeds {
			f.Add(uint8(i), strings.Join(seed, "\x00"))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, packed string) {
		i := int(which) % len(ps)
		argv := strings.Split(packed, "\x00")
		if len(argv) > 64 {
			argv = argv[:64]
		}
		args := make([]any, len(argv))
		for j, a := range argv {
			args[j] = a
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := ps[i].s.Run(ctx, c, ps[i].keys, args...).Err()
		if err != nil && !errors.Is(err, redis.Nil) && IsScriptFault(err) {
			t.Fatalf("%s with ARGV %q: the script faulted instead of checking its arguments: %v", scripts[i].Name, argv, err)
		}
	})
}

// LoadScripts reads .lua files from the current directory (a package's tests run in its
// directory), each with prelude prepended, for FuzzScripts. keys gives each file's KEYS count.
func LoadScripts(f *testing.F, prelude string, keys map[string]int, seeds map[string][][]string) []LuaScript {
	f.Helper()
	var pre string
	if prelude != "" {
		pre = readFile(f, prelude)
	}
	var out []LuaScript
	for _, name := range sortedKeys(keys) {
		out = append(out, LuaScript{Name: name, Src: pre + readFile(f, name), Keys: keys[name], Seeds: seeds[name]})
	}
	return out
}

// IsScriptFault reports whether err is Lua faulting inside a script (a runtime error, or a
// Redis command refusing an argument), rather than an error reply the script chose to return.
func IsScriptFault(err error) bool {
	return err != nil && strings.Contains(err.Error(), "user_script")
}

func readFile(f *testing.F, name string) string {
	f.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		f.Fatal(err)
	}
	return string(b)
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
