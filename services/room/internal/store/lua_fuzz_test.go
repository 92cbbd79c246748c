package store

import (
	"testing"

	"github.com/vigil-dev/vigil/pkg/redistest"
)

// common are ARGV[1..4] of every room script: code, channel, now, idle TTL.
func common(rest ...string) []string {
	return append([]string{"abc234", "vigil:room:abc234", "1700000000000", "3600000"}, rest...)
}

// FuzzLuaArguments fuzzes every room script's argument checks on real Redis (lib.lua
// prepended, as New does): whatever ARGV holds, a script answers or refuses, and never faults
// halfway through its writes.
func FuzzLuaArguments(f *testing.F) {
	redistest.FuzzScripts(f, redistest.LoadScripts(f, "lib.lua",
		map[string]int{"init.lua": 7, "join.lua": 7, "leave.lua": 7, "act.lua": 7, "renew.lua": 7, "sweep.lua": 7, "end.lua": 7, "finish.lua": 7},
		map[string][][]string{
			"init.lua":  {common("1700000000000", "1700000000000", "Routine", "180000"), common("x", "y", "t", "z")},
			"join.lua":  {common("s1", "v", "client-1", "1700000030000"), common("s2", "l", "lead", "1700000030000"), common("s3", "q", "c", "x")},
			"leave.lua": {common("s1")},
			"act.lua": {common("sync", `{"type":"sync"}`, "1", "5000"), common("formation", `{}`, `{"a":1}`),
				common("mark", `{}`, `{"positionMs":1}`), common("reload", `{}`, "1", "title", "1000"), common("sync", `{}`, "yes", "x")},
			"renew.lua":  {common("1700000030000", "s1", "s2"), common("x", "s1")},
			"sweep.lua":  {common(), {"abc234", "ch", "x", "y"}},
			"end.lua":    {common("ended", "60000"), common("expired", "x")},
			"finish.lua": {common("60000"), common("x")},
		})...)
}
