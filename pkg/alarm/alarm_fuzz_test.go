package alarm

import (
	"testing"

	"github.com/vigil-dev/vigil/pkg/redistest"
)

// FuzzLuaArguments fuzzes every alarm script's argument checks on real Redis: whatever ARGV
// holds, a script answers or refuses, and never faults halfway through its writes.
func FuzzLuaArguments(f *testing.F) {
	redistest.FuzzScripts(f, redistest.LoadScripts(f, "lib.lua",
		map[string]int{"claim.lua": 3, "ack.lua": 3, "retry.lua": 5, "revive.lua": 4, "set.lua": 1},
		map[string][][]string{
			"claim.lua":  {{"1700000000000", "1700000015000.5", "256"}, {"x", "1.5", "-1"}},
			"ack.lua":    {{"1700000015000.5", "a", "b"}, {"nan"}},
			"retry.lua":  {{"1700000015000.5", "a", "1700000016000.25", "0", "1700000000000", "{}"}, {"1.5", "a", "2.5", "1", "1", `{"error":"x"}`}},
			"revive.lua": {{"a", "1700000000000"}, {"a", ""}},
			"set.lua":    {{"a", "1700000000000"}, {"a", ""}, {"a", "inf"}},
		})...)
}
