package store

import (
	"testing"

	"github.com/vigil-dev/vigil/pkg/redistest"
)

// FuzzLuaArguments fuzzes the chat scripts' argument checks on real Redis: whatever ARGV
// holds, a script answers or refuses, and never faults halfway through its writes.
func FuzzLuaArguments(f *testing.F) {
	redistest.FuzzScripts(f, redistest.LoadScripts(f, "",
		map[string]int{"append.lua": 3, "read.lua": 2},
		map[string][][]string{
			"append.lua": {{"encoded", "1000", "vigil:chat:general", "0"}, {"encoded", "10", "ch", "60000"}, {"m", "x", "ch", "y"}},
			"read.lua":   {{"last", "0", "50"}, {"after", "3", "50"}, {"before", "9", "50"}, {"between", "x", "y"}},
		})...)
}
