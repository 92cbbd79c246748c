// Command racepkgs prints the packages `make test-race` runs under the race detector: of the
// packages its arguments match (go list patterns), every one with tests, minus those
// .ci/race-exclude.txt names, each with its reason. Not only the packages that start goroutines:
// a hub, an index or a clock that others call from many goroutines races there, and its own
// tests are where its concurrent callers are. The list is computed, not kept by hand, so a new
// package joins it with its first test.
//
//	go run github.com/vigil-dev/vigil/ci/racepkgs -exclude .ci/race-exclude.txt ./pkg/... ./gateway/...
//
// It prints one import path a line; on standard error, what it left out and why.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
)

func main() {
	exclude := flag.String("exclude", "", "a file naming packages left out, one import path a line followed by # and the reason")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: racepkgs [-exclude file] package-pattern...")
		os.Exit(2)
	}
	excluded := map[string]string{}
	if *exclude != "" {
		b, err := os.ReadFile(*exclude)
		if err != nil {
			fmt.Fprintln(os.Stderr, "racepkgs:", err)
			os.Exit(2)
		}
		if excluded, err = parseExclusions(string(b)); err != nil {
			fmt.Fprintf(os.Stderr, "racepkgs: %s: %v\n", *exclude, err)
			os.Exit(2)
		}
	}
	pkgs, err := listPackages(flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "racepkgs:", err)
		os.Exit(1)
	}
	race, report, err := choose(pkgs, excluded)
	if err != nil {
		fmt.Fprintln(os.Stderr, "racepkgs:", err)
		os.Exit(1)
	}
	fmt.Fprint(os.Stderr, report)
	for _, p := range race {
		fmt.Println(p)
	}
}

// pkg is what go list says of a package.
type pkg struct {
	ImportPath   string
	Dir          string
	GoFiles      []string
	TestGoFiles  []string
	XTestGoFiles []string
}

// listPackages runs go list on the patterns.
func listPackages(patterns []string) ([]pkg, error) {
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Dir,GoFiles,TestGoFiles,XTestGoFiles"}, patterns...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v: %s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading go list: %w", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

// choose returns the packages to race, sorted, and a report of what it left out. Every
// exclusion must name a package with tests (a stale one is an error).
func choose(pkgs []pkg, excluded map[string]string) ([]string, string, error) {
	var race, noTests []string
	var report strings.Builder
	used := map[string]bool{}
	for _, p := range pkgs {
		if len(p.TestGoFiles)+len(p.XTestGoFiles) == 0 {
			noTests = append(noTests, p.ImportPath)
			continue
		}
		if reason, ok := excluded[p.ImportPath]; ok {
			used[p.ImportPath] = true
			fmt.Fprintf(&report, "racepkgs: left out %s: %s\n", p.ImportPath, reason)
			continue
		}
		race = append(race, p.ImportPath)
	}
	for p := range excluded {
		if !used[p] {
			return nil, "", fmt.Errorf("%s is excluded but no package with tests matches it: drop it from the exclusions", p)
		}
	}
	sort.Strings(race)
	fmt.Fprintf(&report, "racepkgs: %d packages with tests to race, %d left out; %d packages have no tests (their code runs in other packages' tests)\n",
		len(race), len(used), len(noTests))
	return race, report.String(), nil
}

// parseExclusions reads "import/path # reason" lines; a line without a reason is an error.
func parseExclusions(s string) (map[string]string, error) {
	m := map[string]string{}
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		path, reason, _ := strings.Cut(line, "#")
		path, reason = strings.TrimSpace(path), strings.TrimSpace(reason)
		if reason == "" {
			return nil, fmt.Errorf("line %d: %s is excluded without a reason (import/path # reason)", i+1, path)
		}
		m[path] = reason
	}
	return m, nil
}
