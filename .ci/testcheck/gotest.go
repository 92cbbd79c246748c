package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output and build-fail events
}

// readGoTest reads test2json events from r, echoing to w as o says.
func readGoTest(r io.Reader, w io.Writer, o options) (*results, error) {
	res := newResults()
	held := map[string]*strings.Builder{} // a test's output, echoed if it fails or skips
	failedIn := map[string]bool{}         // packages with a test that failed or never ended
	pkgFailed := map[string]bool{}
	echo := func(s string) {
		if o.verbose && o.showRE != nil && !o.showRE.MatchString(strings.TrimRight(s, "\n")) {
			return
		}
		io.WriteString(w, s)
	}
	sc := lineReader(r)
	for sc.Scan() {
		line := sc.Text()
		var e event
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil || e.Action == "" {
			echo(line + "\n") // the toolchain's own words: a vet finding, a build error on stderr
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "build-output":
			echo(e.Output)
		case "build-fail":
			res.problems = append(res.problems, e.ImportPath+" did not build")
		case "output":
			if strings.HasPrefix(e.Output, "=== PAUSE") || strings.HasPrefix(e.Output, "=== CONT") {
				continue
			}
			if o.verbose || e.Test == "" {
				echo(e.Output)
				continue
			}
			b := held[key]
			if b == nil {
				b = &strings.Builder{}
				held[key] = b
			}
			b.WriteString(e.Output)
		case "run":
			if e.Test != "" {
				res.record(e.Package, e.Test, "run")
			}
		case "pass", "fail", "skip":
			if e.Test == "" {
				switch e.Action {
				case "fail":
					pkgFailed[e.Package] = true
				case "skip":
					if !o.allowNoTests {
						res.problems = append(res.problems, e.Package+" has no tests to run")
					}
				}
				continue
			}
			res.record(e.Package, e.Test, outcome(e.Action))
			if e.Action == "fail" {
				failedIn[e.Package] = true
			}
			if e.Action != "pass" && !o.verbose {
				if b := held[key]; b != nil {
					echo(b.String())
				}
			}
			delete(held, key)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the report: %w", err)
	}
	for _, key := range res.order {
		if res.tests[key] == "run" {
			pkg, _, _ := strings.Cut(key, " ")
			failedIn[pkg] = true
			if !o.verbose {
				if b := held[key]; b != nil {
					echo(b.String())
				}
			}
		}
	}
	for pkg := range pkgFailed {
		if !failedIn[pkg] {
			res.problems = append(res.problems, pkg+" failed outside any test (TestMain, the binary, or its build)")
		}
	}
	return res, nil
}
