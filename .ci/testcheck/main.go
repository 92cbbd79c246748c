// Command testcheck reads a test run's own report and fails when it tested less than it should:
// a test that failed or was skipped, a package with no tests, or an expected test that did not
// run. "Something ran" is not enough: each CI stage names the tests it expects (.ci/expected),
// so a renamed test, a `-run` pattern that no longer matches, or a fuzz target that no longer
// exists fails the stage instead of turning it green with less in it.
//
//	go test -json -run 'TestFault' ./deploy/faulttest/ | testcheck -expect .ci/expected/faults.txt
//	go test -json -run '^$' -fuzz '^FuzzX$' ./pkg/x | testcheck -want FuzzX
//	python3 -m unittest -v ... 2>&1 | testcheck -unittest -expect .ci/expected/python.txt
//
// It reads `go test -json` (test2json events) or, with -unittest, Python unittest's verbose
// report, and echoes the run as it goes: the output of failed and skipped tests and each
// package's summary line, or every line with -v (those matching -show when given). It exits 1
// with one line per problem; the stage's own exit status is the shell's (pipefail) to keep.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

func main() {
	var o options
	flag.Var((*listFlag)(&o.expectFiles), "expect", "a file naming the tests that must run and pass, one a line (# comments); repeatable")
	flag.Var((*listFlag)(&o.want), "want", "a test that must run and pass; repeatable")
	flag.BoolVar(&o.unittest, "unittest", false, "read Python unittest's verbose report (-v) instead of go test -json")
	flag.BoolVar(&o.verbose, "v", false, "echo every line of the run, not only failures and summaries")
	flag.StringVar(&o.show, "show", "", "with -v, echo only the lines this regular expression matches")
	flag.BoolVar(&o.allowNoTests, "allow-no-tests", false, "a package without test files is not a problem (a whole-suite run over every package)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "testcheck: unexpected arguments %q: the run's report is read from standard input\n", flag.Args())
		os.Exit(2)
	}
	if err := o.load(); err != nil {
		fmt.Fprintln(os.Stderr, "testcheck:", err)
		os.Exit(2)
	}
	problems, summary, err := check(os.Stdin, os.Stdout, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testcheck:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Printf("testcheck: %s\n", p)
	}
	fmt.Printf("testcheck: %s\n", summary)
	if len(problems) > 0 {
		os.Exit(1)
	}
}

// options say what a run must show and how much of it to echo.
type options struct {
	expectFiles  []string
	want         []string // the expected tests: -want names, then each -expect file's lines
	unittest     bool
	verbose      bool
	show         string
	allowNoTests bool

	showRE *regexp.Regexp
}

// load reads the -expect files into want and compiles -show.
func (o *options) load() error {
	for _, f := range o.expectFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("reading the expected tests: %w", err)
		}
		names := parseExpected(string(b))
		if len(names) == 0 {
			return fmt.Errorf("%s names no test: a stage must name what it expects", f)
		}
		o.want = append(o.want, names...)
	}
	if o.show != "" {
		re, err := regexp.Compile(o.show)
		if err != nil {
			return fmt.Errorf("-show %q: %w", o.show, err)
		}
		o.showRE = re
	}
	return nil
}

// parseExpected returns the test names of an expected file: one a line, blank lines and
// everything after a # left out.
func parseExpected(s string) []string {
	var names []string
	for _, line := range strings.Split(s, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		if line = strings.TrimSpace(line); line != "" {
			names = append(names, line)
		}
	}
	return names
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// check reads a run's report from r, echoes it to w as the options say, and returns the
// problems found and a one-line summary.
func check(r io.Reader, w io.Writer, o options) (problems []string, summary string, err error) {
	var res *results
	if o.unittest {
		res, err = readUnittest(r, w, o)
	} else {
		res, err = readGoTest(r, w, o)
	}
	if err != nil {
		return nil, "", err
	}
	return res.judge(o)
}

// outcome is how one test ended: "pass", "fail", "skip", or "run" when it started and never
// ended (a panic, a timeout, a killed binary).
type outcome string

// results is what a report said about each test, in the order tests first appeared.
type results struct {
	order    []string           // "package test" keys (package empty for unittest)
	tests    map[string]outcome // by key
	byName   map[string][]string
	problems []string // found while reading: packages that failed or had no tests
}

func newResults() *results {
	return &results{tests: map[string]outcome{}, byName: map[string][]string{}}
}

// record sets a test's outcome; a test seen for the first time is added in order.
func (res *results) record(pkg, test string, o outcome) {
	key := pkg + " " + test
	if _, ok := res.tests[key]; !ok {
		res.order = append(res.order, key)
		res.byName[test] = append(res.byName[test], key)
	}
	res.tests[key] = o
}

// judge returns the problems: every test that failed, was skipped or never ended, every
// expected test not among the passed ones, and what reading found.
func (res *results) judge(o options) ([]string, string, error) {
	problems := append([]string(nil), res.problems...)
	counts := map[outcome]int{}
	for _, key := range res.order {
		oc := res.tests[key]
		counts[oc]++
		name := strings.TrimSpace(key)
		switch oc {
		case "fail":
			problems = append(problems, name+" failed")
		case "skip":
			problems = append(problems, name+" was skipped (a skipped test tests nothing)")
		case "run":
			problems = append(problems, name+" started and never ended (a panic, a timeout or a killed run)")
		}
	}
	passedWanted := 0
	seen := map[string]bool{}
	for _, name := range o.want {
		if seen[name] {
			continue
		}
		seen[name] = true
		keys := res.byName[name]
		if len(keys) == 0 {
			problems = append(problems, name+" is expected and did not run (renamed, removed, or no longer selected)")
			continue
		}
		ok := true
		for _, k := range keys {
			ok = ok && res.tests[k] == "pass"
		}
		if ok {
			passedWanted++
		}
	}
	if len(res.order) == 0 && len(o.want) == 0 && len(res.problems) == 0 {
		problems = append(problems, "the report holds no test at all")
	}
	summary := fmt.Sprintf("%d tests ran: %d passed, %d failed, %d skipped, %d never ended; %d of %d expected passed",
		len(res.order), counts["pass"], counts["fail"], counts["skip"], counts["run"], passedWanted, len(seen))
	if len(problems) == 0 {
		summary = "PASS, " + summary
	} else {
		summary = "FAIL, " + summary
	}
	return problems, summary, nil
}

// lineReader reads lines of any length.
func lineReader(r io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	return sc
}
