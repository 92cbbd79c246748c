package store

import (
	"testing"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/redistest"
)

// FuzzLuaArguments fuzzes every reservation script's argument checks on real Redis: whatever
// ARGV holds, a script answers or refuses, and never faults halfway through its writes.
func FuzzLuaArguments(f *testing.F) {
	scripts := redistest.LoadScripts(f, "",
		map[string]int{"create.lua": 2, "expire.lua": 3, "settle.lua": 2, "get.lua": 2},
		map[string][][]string{
			"create.lua": {{"abc", "1700000000000", "1700000030000"}, {"abc", "x", "1e3"}},
			"expire.lua": {{"1700000030000", "brief", "abc", "abd"}, {"1700000030000", "full", "abc", "abd"}, {"0x10", "full", "abc", "abd"}, {"1700000030000", "abc"}},
			"settle.lua": {{"abc", "confirmed", "1700000000000"}, {"abc", "released", "1"}, {"abc", "held", "1"}},
			"get.lua":    {{"abc"}, {""}},
		})
	for i := range scripts {
		scripts[i].Src = alarm.Lua() + scripts[i].Src // as alarm.NewScript runs them
	}
	redistest.FuzzScripts(f, scripts...)
}
