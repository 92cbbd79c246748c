package store

import (
	"os"
	"testing"

	"github.com/vigil-dev/vigil/pkg/redistest"
)

// The reservation scripts' argument checks, fuzzed on real Redis: whatever ARGV holds, a script
// answers or refuses, and never faults halfway through its writes.

func fuzzLua(f *testing.F, file string, seeds ...[]string) {
	src, err := os.ReadFile(file)
	if err != nil {
		f.Fatal(err)
	}
	redistest.FuzzScript(f, string(src), 2, seeds...)
}

func FuzzCreateLua(f *testing.F) {
	fuzzLua(f, "create.lua", []string{"abc", "1700000000000", "1700000030000"}, []string{"abc", "x", "1e3"})
}

func FuzzExpireLua(f *testing.F) {
	fuzzLua(f, "expire.lua", []string{"abc", "1700000030000"}, []string{"abc", "0x10"})
}

func FuzzSettleLua(f *testing.F) {
	fuzzLua(f, "settle.lua", []string{"abc", "confirmed", "1700000000000"}, []string{"abc", "released", "1"}, []string{"abc", "held", "1"})
}

func FuzzGetLua(f *testing.F) {
	fuzzLua(f, "get.lua", []string{"abc"}, []string{""})
}
