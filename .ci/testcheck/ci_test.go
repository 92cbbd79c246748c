package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The CI scripts' guards, each broken once against the fixture package (testdata/fixture) and
// seen to fail: a renamed fuzz target, a missing test, a skipped test, a failing one. These
// run the scripts .ci/run and the Makefile run (.ci/gotest, .ci/fuzz), not only the checker.

const fixture = "./.ci/testcheck/testdata/fixture"

// runScript runs a script of .ci from the repository's root and returns its output and
// whether it exited 0.
func runScript(t *testing.T, script string, args ...string) (string, bool) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, ".ci", script), args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "VIGIL_FUZZTIME=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("%s: %v", script, err)
		}
	}
	return string(out), err == nil
}

// writeList writes a file of lines in the test's directory and returns its path.
func writeList(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "list.txt")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFuzzStageFailsOnARenamedTarget(t *testing.T) {
	t.Parallel()
	out, ok := runScript(t, "fuzz", writeList(t, fixture+" FuzzTarget 20x"))
	if !ok || !strings.Contains(out, "1 of 1 expected passed") {
		t.Fatalf(".ci/fuzz with an existing target failed or checked nothing:\n%s", out)
	}
	// go test -fuzz '^FuzzRenamed$' alone warns "no fuzz tests to fuzz" and exits 0.
	out, ok = runScript(t, "fuzz", writeList(t, fixture+" FuzzTarget 20x", fixture+" FuzzRenamed 20x"))
	if ok || !strings.Contains(out, "FuzzRenamed is expected and did not run") {
		t.Fatalf(".ci/fuzz passed a target that does not exist:\n%s", out)
	}
}

func TestGoTestStageFailsOnAMissingTest(t *testing.T) {
	t.Parallel()
	expect := writeList(t, "# the fixture's two passing tests and a subtest", "TestPasses", "TestHasParts", "TestHasParts/first_part")
	out, ok := runScript(t, "gotest", "-expect", expect, "--", "-run", "^(TestPasses|TestHasParts)$", fixture)
	if !ok || !strings.Contains(out, "3 of 3 expected passed") {
		t.Fatalf(".ci/gotest failed with every expected test run:\n%s", out)
	}
	// A -run pattern that selects one of the two (as after a rename) ran a test: not enough.
	out, ok = runScript(t, "gotest", "-expect", expect, "--", "-run", "^TestPasses$", fixture)
	if ok || !strings.Contains(out, "TestHasParts is expected and did not run") || !strings.Contains(out, "TestHasParts/first_part is expected") {
		t.Fatalf(".ci/gotest passed with an expected test not run:\n%s", out)
	}
}

func TestGoTestStageFailsOnASkippedTest(t *testing.T) {
	t.Parallel()
	out, ok := runScript(t, "gotest", "-want", "TestPasses", "--", "-run", "^(TestPasses|TestSkips)$", fixture)
	if ok || !strings.Contains(out, "TestSkips was skipped") {
		t.Fatalf(".ci/gotest passed a run with a skipped test:\n%s", out)
	}
}

func TestGoTestStageFailsOnAFailedTest(t *testing.T) {
	t.Parallel()
	out, ok := runScript(t, "gotest", "-want", "TestPasses", "--", "-run", "^(TestPasses|TestFails)$", fixture)
	if ok || !strings.Contains(out, "TestFails failed") || !strings.Contains(out, "this test fails on purpose") {
		t.Fatalf(".ci/gotest passed a run with a failed test, or hid its output:\n%s", out)
	}
}
