package alarm

import (
	"os"
	"testing"

	"github.com/vigil-dev/vigil/pkg/redistest"
)

// The alarm scripts' argument checks, fuzzed on real Redis: whatever ARGV holds, a script
// answers or refuses, and never faults halfway through its writes.

func fuzzLua(f *testing.F, file string, keys int, seeds ...[]string) {
	src, err := os.ReadFile(file)
	if err != nil {
		f.Fatal(err)
	}
	redistest.FuzzScript(f, string(src), keys, seeds...)
}

func FuzzClaimLua(f *testing.F) {
	fuzzLua(f, "claim.lua", 2, []string{"1700000000000", "1700000015000.5", "256"}, []string{"x", "1.5", "-1"})
}

func FuzzAckLua(f *testing.F) {
	fuzzLua(f, "ack.lua", 2, []string{"1700000015000.5", "a", "b"}, []string{"nan"})
}

func FuzzRetryLua(f *testing.F) {
	fuzzLua(f, "retry.lua", 4, []string{"1700000015000.5", "a", "1700000016000.25", "0", "1700000000000", "{}"},
		[]string{"1.5", "a", "2.5", "1", "1", `{"error":"x"}`})
}

func FuzzReviveLua(f *testing.F) {
	fuzzLua(f, "revive.lua", 4, []string{"a", "1700000000000"}, []string{"a", ""})
}

func FuzzSetLua(f *testing.F) {
	fuzzLua(f, "set.lua", 1, []string{"a", "1700000000000"}, []string{"a", ""}, []string{"a", "inf"})
}
