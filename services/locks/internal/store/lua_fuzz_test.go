package store

import (
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/redistest"
)

// fuzzEntry is a waiter entry: "deadline\nttl\nwid\nchannel\nowner".
const fuzzEntry = "1700000060000\n30000\nw1\nvigil:locks:grants:r1\nowner-b"

// FuzzLuaArguments fuzzes every lock script's argument checks on real Redis (pkg/alarm's
// contract and lib.lua prepended, as New does): whatever ARGV holds, a script answers or refuses, and never faults
// halfway through its writes.
func FuzzLuaArguments(f *testing.F) {
	const now = "1700000000000"
	scripts := redistest.LoadScripts(f, "",
		map[string]int{"acquire.lua": 4, "release.lua": 4, "renew.lua": 4, "get.lua": 4, "expire.lua": 4, "leave.lua": 4},
		map[string][][]string{
			"acquire.lua": {{"res", now, "owner-a", "30000", "", "0", "0"}, {"res", now, "owner-b", "30000", fuzzEntry, "65000", "0"},
				{"res", now, "owner-c", "x", "bad\nentry", "y", "z"}},
			"release.lua": {{"res", now, "owner-a"}, {"res", "now", "owner-a"}, {"res", now, "owner-a", "ch", "7"}, {"res", now, "owner-a", "ch", "-1"}},
			"renew.lua":   {{"res", now, "owner-a", "30000"}, {"res", "1", "owner-a", "1e9"}, {"res", now, "owner-a", "30000", "7"}, {"res", now, "owner-a", "30000", "x"}},
			"get.lua":     {{"res", now}},
			"expire.lua":  {{"res", now}, {"res", ""}},
			"leave.lua":   {{"res", now, fuzzEntry, "w1", "0"}, {"res", "1", "x", "w1", "2"}},
		})
	for i := range scripts {
		scripts[i].Src = alarm.Lua() + libFor(2*time.Second) + scripts[i].Src // as New builds them
	}
	redistest.FuzzScripts(f, scripts...)
}
