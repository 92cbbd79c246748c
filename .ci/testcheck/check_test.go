package main

import (
	"io"
	"strings"
	"testing"
)

func TestParseExpected(t *testing.T) {
	got := parseExpected("# a comment\nTestA\n\n  TestB/part one  # why\n")
	want := []string{"TestA", "TestB/part one"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("parseExpected = %q, want %q", got, want)
	}
}

// goTestReport is a report as go test -json writes it: a passed test, a subtest, a test whose
// binary died mid-run (no pass or fail), a package without tests.
const goTestReport = `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"run","Package":"p","Test":"TestB/one"}
{"Action":"pass","Package":"p","Test":"TestB/one"}
{"Action":"pass","Package":"p","Test":"TestB"}
{"Action":"run","Package":"p","Test":"TestHang"}
{"Action":"output","Package":"p","Test":"TestHang","Output":"panic: test timed out after 1s\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t1.0s\n"}
{"Action":"fail","Package":"p"}
{"Action":"start","Package":"q"}
{"Action":"output","Package":"q","Output":"?   \tq\t[no test files]\n"}
{"Action":"skip","Package":"q"}
`

func TestGoTestReport(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    options
		want []string // the problems, in order
	}{
		{"every test judged", options{want: []string{"TestA", "TestB/one"}}, []string{
			"q has no tests to run",
			"p TestHang started and never ended (a panic, a timeout or a killed run)",
		}},
		{"a package without tests allowed", options{allowNoTests: true, want: []string{"TestGone"}}, []string{
			"p TestHang started and never ended (a panic, a timeout or a killed run)",
			"TestGone is expected and did not run (renamed, removed, or no longer selected)",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var echo strings.Builder
			problems, summary, err := check(strings.NewReader(goTestReport), &echo, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(problems, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(tc.want, "\n"))
			}
			if !strings.HasPrefix(summary, "FAIL, 4 tests ran: 3 passed, 0 failed, 0 skipped, 1 never ended") {
				t.Errorf("summary = %q", summary)
			}
			// Quiet: the hung test's output and the packages' lines, not the passed test's.
			if s := echo.String(); !strings.Contains(s, "panic: test timed out") || strings.Contains(s, "=== RUN   TestA") || !strings.Contains(s, "[no test files]") {
				t.Errorf("echoed:\n%s", s)
			}
		})
	}
}

func TestGoTestReportVerboseShow(t *testing.T) {
	var echo strings.Builder
	o := options{verbose: true, show: "^(=== RUN|FAIL)", allowNoTests: true}
	if err := o.load(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := check(strings.NewReader(goTestReport), &echo, o); err != nil {
		t.Fatal(err)
	}
	if want := "=== RUN   TestA\nFAIL\tp\t1.0s\n"; echo.String() != want {
		t.Errorf("echoed %q, want %q", echo.String(), want)
	}
}

func TestGoTestReportEmpty(t *testing.T) {
	problems, _, err := check(strings.NewReader("go: no such package\n"), io.Discard, options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || problems[0] != "the report holds no test at all" {
		t.Fatalf("problems = %q", problems)
	}
}

// unittestReport is Python 3.11's unittest -v: a pass, a skip, a failure whose result comes
// after the test's own output, and the summary.
const unittestReport = `test_acquire (test_lockclient.MutexTest.test_acquire) ... ok
test_gone (test_lockclient.MutexTest.test_gone) ... skipped 'no server'
test_renew (test_lockclient.MutexTest.test_renew)
Renews in the background. ... some output
FAIL

======================================================================
FAIL: test_renew (test_lockclient.MutexTest.test_renew)
----------------------------------------------------------------------
Ran 3 tests in 0.5s

FAILED (failures=1, skipped=1)
`

func TestUnittestReport(t *testing.T) {
	var echo strings.Builder
	o := options{unittest: true, want: []string{"test_lockclient.MutexTest.test_acquire", "test_lockclient.MutexTest.test_released"}}
	problems, summary, err := check(strings.NewReader(unittestReport), &echo, o)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		" test_lockclient.MutexTest.test_gone was skipped (a skipped test tests nothing)",
		" test_lockclient.MutexTest.test_renew failed",
		"test_lockclient.MutexTest.test_released is expected and did not run (renamed, removed, or no longer selected)",
	}
	for i := range want {
		want[i] = strings.TrimSpace(want[i])
	}
	if strings.Join(problems, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
	if !strings.HasPrefix(summary, "FAIL, 3 tests ran: 1 passed, 1 failed, 1 skipped") {
		t.Errorf("summary = %q", summary)
	}
	if echo.String() != unittestReport {
		t.Errorf("the report was not echoed whole")
	}
}

func TestUnittestReportCountsEveryTest(t *testing.T) {
	// Without -v unittest names no test; its count is then the only sign that tests ran.
	problems, _, err := check(strings.NewReader("...\nRan 3 tests in 0.1s\n\nOK\n"), io.Discard, options{unittest: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || !strings.Contains(problems[0], "unittest ran 3 tests and its verbose report names 0") {
		t.Fatalf("problems = %q", problems)
	}
}
