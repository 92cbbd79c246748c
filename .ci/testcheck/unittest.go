package main

import (
	"fmt"
	"io"
	"regexp"
	"strings"
)

var (
	// unittestStart matches a test's line in unittest's verbose report:
	// "test_acquire (test_lockclient.MutexTest.test_acquire) ... ok", the result possibly on a
	// later line when the test's docstring or its own output comes between.
	unittestStart = regexp.MustCompile(`^(\w+) \(([\w.]+)\)`)
	// unittestResult matches a result as unittest prints it.
	unittestResult = regexp.MustCompile(`^(ok|FAIL|ERROR|skipped.*|expected failure|unexpected success)$`)
	// unittestRan is the report's closing count.
	unittestRan = regexp.MustCompile(`^Ran (\d+) tests? in `)
)

// readUnittest reads Python unittest's verbose report from r, echoing every line to w.
// A test is named by its id as unittest prints it: module.Class.test_name.
func readUnittest(r io.Reader, w io.Writer, o options) (*results, error) {
	res := newResults()
	current := "" // the test whose result has not been read yet
	ran, sawFailed := -1, false
	sc := lineReader(r)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(w, line)
		if m := unittestStart.FindStringSubmatch(line); m != nil {
			current = m[2]
			if !strings.HasSuffix(current, "."+m[1]) {
				current += "." + m[1] // Python before 3.11 prints only module.Class
			}
			res.record("", current, "run")
		}
		if current == "" {
			if m := unittestRan.FindStringSubmatch(line); m != nil {
				fmt.Sscan(m[1], &ran)
			}
			sawFailed = sawFailed || strings.HasPrefix(line, "FAILED")
			continue
		}
		rest := line
		if i := strings.LastIndex(line, " ... "); i >= 0 {
			rest = line[i+len(" ... "):]
		}
		if m := unittestResult.FindStringSubmatch(strings.TrimSpace(rest)); m != nil {
			res.record("", current, unittestOutcome(m[1]))
			current = ""
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the report: %w", err)
	}
	if ran < 0 {
		res.problems = append(res.problems, `the report has no "Ran N tests" line: unittest did not finish`)
	} else if ran != len(res.order) {
		res.problems = append(res.problems, fmt.Sprintf("unittest ran %d tests and its verbose report names %d (run it with -v)", ran, len(res.order)))
	}
	if sawFailed {
		failed := false
		for _, key := range res.order {
			failed = failed || res.tests[key] == "fail"
		}
		if !failed {
			res.problems = append(res.problems, "unittest says FAILED")
		}
	}
	return res, nil
}

// unittestOutcome maps a unittest result to a test's outcome. An expected failure counts as
// a failure here: a test that asserts its own failure tests nothing.
func unittestOutcome(s string) outcome {
	switch {
	case s == "ok":
		return "pass"
	case strings.HasPrefix(s, "skipped"):
		return "skip"
	default:
		return "fail"
	}
}
