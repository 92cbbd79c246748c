package store

import (
	"testing"

	"github.com/vigil-dev/vigil/pkg/redistest"
)

// FuzzLuaArguments fuzzes the chat scripts' argument checks on real Redis (presence_lib.lua
// prepended to the presence scripts, as New does): whatever ARGV holds, a script answers or
// refuses, and never faults halfway through its writes.
func FuzzLuaArguments(f *testing.F) {
	// ARGV[1..2] of every presence script: the room's channel and now.
	common := func(rest ...string) []string {
		return append([]string{"vigil:{chat:general}:live", "1764000000000"}, rest...)
	}
	scripts := redistest.LoadScripts(f, "",
		map[string]int{"append.lua": 4, "read.lua": 2},
		map[string][][]string{
			"append.lua": {{"encoded", "1000", "vigil:chat:general", "0"}, {"encoded", "10", "ch", "60000"}, {"m", "x", "ch", "y"}},
			"read.lua":   {{"last", "0", "50"}, {"after", "3", "50"}, {"before", "9", "50"}, {"between", "x", "y"}},
		})
	scripts = append(scripts, redistest.LoadScripts(f, "presence_lib.lua",
		map[string]int{"enter.lua": 6, "exit.lua": 6, "renew.lua": 6, "presence.lua": 6},
		map[string][][]string{
			"enter.lua": {common("g1:1", "u1", "Ann", "h1", "1764000015000"), common("g1:1", "u2", "Bo", "h1", "1764000015000"),
				common("g1:2", "u1", "Ann", "h	2", "1764000015000"), common("", "", "", "", "x")},
			"exit.lua":     {common("g1:1", ""), common("g1:1", "h1"), common("g1:1")},
			"renew.lua":    {common("1764000030000", "h1", "g1:1", "g1:2"), common("x", "h1"), common("1", "")},
			"presence.lua": {common(), {"ch", "-1"}, {"ch", "1764000099000"}},
		})...)
	redistest.FuzzScripts(f, scripts...)
}
