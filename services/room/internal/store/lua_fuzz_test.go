package store

import (
	"testing"

	"github.com/vigil-dev/vigil/pkg/alarm"
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
	scripts := redistest.LoadScripts(f, "lib.lua",
		map[string]int{"init.lua": 12, "join.lua": 12, "leave.lua": 12, "act.lua": 12, "renew.lua": 12, "sweep.lua": 12, "end.lua": 12, "finish.lua": 12},
		map[string][][]string{
			"init.lua": {common("1700000000000", "1700000000000", "Routine", "180000"), common("x", "y", "t", "z")},
			"join.lua": {common("s1", "v", "client-1", "1700000030000", "att1", "Ana"), common("s2", "l", "lead", "1700000030000", "att2", "Lead 日"),
				common("s3", "q", "c", "x", "att3", "x"), common("s1", "v", "client-1", "1700000030000", "", "Ana"), common("s4", "v", "c", "1", "att4", "")},
			"leave.lua": {common("s1", "att1"), common("s1", "")},
			"act.lua": {common("sync", `{"type":"sync"}`, "s2", "1", "1", "5000", "100", "0", "0"),
				common("loop", `{}`, "s2", "4", "1000", "5000"), common("markFormation", `{}`, "s2", "5", "1", `{"dancers":[]}`), common("formation", `{}`, "s2", "0", `{"a":1}`),
				common("mark", `{}`, "s2", "2", `{"positionMs":1}`, "1", "200"), common("reload", `{}`, "s2", "3", "1", "title", "1000"),
				common("sync", `{}`, "s2", "-1", "yes", "x")},
			"renew.lua":  {common("1700000030000", "s1", "s2"), common("x", "s1")},
			"sweep.lua":  {common(), {"abc234", "ch", "x", "y"}},
			"end.lua":    {common("ended", "60000"), common("expired", "x")},
			"finish.lua": {common("60000"), common("x")},
		})
	for i := range scripts {
		scripts[i].Src = alarm.Lua() + scripts[i].Src // as New builds them
	}
	redistest.FuzzScripts(f, scripts...)
}
