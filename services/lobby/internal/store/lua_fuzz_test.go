package store

import (
	"testing"

	"github.com/vigil-dev/vigil/pkg/redistest"
)

// FuzzLuaArguments fuzzes the lobby scripts' argument checks on real Redis: whatever ARGV
// holds, a script answers or refuses, and never faults halfway through its writes.
func FuzzLuaArguments(f *testing.F) {
	redistest.FuzzScripts(f, redistest.LoadScripts(f, "lib.lua",
		map[string]int{"create.lua": 8, "delta.lua": 6, "snapshot.lua": 6, "prune.lua": 8, "remove.lua": 8, "touch.lua": 3, "poll.lua": 6},
		map[string][][]string{
			"create.lua":   {{"abc234", "1700000000000", "1700000000000\n1000\nname\ntitle", "hash"}},
			"delta.lua":    {{"abc234", "1", "1", "0"}, {"abc234", "x", "1.5", "-1"}},
			"snapshot.lua": {{"abc234", "3", "2", "1"}, {"abc234", "3", "two", "1"}},
			"prune.lua":    {{"1700000000000", "100"}, {"x", "-1"}},
			"remove.lua":   {{"abc234"}, {"abc234", "def567"}},
			"touch.lua":    {{"abc234", "1700000000000"}, {"abc234", "nan"}},
			"poll.lua":     {{"0-0", "0", "5000"}, {"1700000000000-0", "3", "1"}, {"x", "-1", "0"}},
		})...)
}
