package repocheck

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// readList returns the non-comment lines of a list under .ci/expected, split into fields.
func readList(t *testing.T, name string) [][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, ".ci", "expected", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if fields := strings.Fields(line); len(fields) > 0 {
			lines = append(lines, fields)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

var testFunc = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)\w+)\(\w+ \*testing\.[TF]\)`)

// testFuncs returns the Test and Fuzz functions of the _test.go files in a directory.
func testFuncs(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	funcs := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(b), -1) {
			funcs[m[1]] = true
		}
	}
	return funcs
}

// The stages' lists are checked when a stage runs; a rename shows here first, in make test.
func TestExpectedTestsExist(t *testing.T) {
	for list, dir := range map[string]string{
		"cluster.txt":       "deploy/faulttest",
		"faults.txt":        "deploy/faulttest",
		"nemesis.txt":       "deploy/nemesis",
		"compose-pause.txt": "deploy/composepause",
		"k8s.txt":           "deploy/k8s",
	} {
		funcs := testFuncs(t, dir)
		for _, fields := range readList(t, list) {
			top, _, _ := strings.Cut(fields[0], "/")
			if !funcs[top] {
				t.Errorf(".ci/expected/%s names %s, and %s has no func %s", list, fields[0], dir, top)
			}
		}
	}
}

func TestExpectedPythonTestsExist(t *testing.T) {
	dir := filepath.Join(root, "pkg/api/python/tests")
	classes := map[string]map[string]bool{} // "module.Class" -> its test methods
	class := regexp.MustCompile(`^class (\w+)\(`)
	method := regexp.MustCompile(`^    (?:async )?def (test\w*)\(`)
	files, _ := filepath.Glob(filepath.Join(dir, "test_*.py"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		module := strings.TrimSuffix(filepath.Base(f), ".py")
		current := ""
		for _, line := range strings.Split(string(b), "\n") {
			if m := class.FindStringSubmatch(line); m != nil {
				current = module + "." + m[1]
				classes[current] = map[string]bool{}
			} else if m := method.FindStringSubmatch(line); m != nil && current != "" {
				classes[current][m[1]] = true
			}
		}
	}
	listed := map[string]bool{}
	for _, fields := range readList(t, "python.txt") {
		id := fields[0]
		listed[id] = true
		i := strings.LastIndex(id, ".")
		if i < 0 || !classes[id[:i]][id[i+1:]] {
			t.Errorf(".ci/expected/python.txt names %s, which pkg/api/python/tests does not define", id)
		}
	}
	for c, methods := range classes {
		for m := range methods {
			if !listed[c+"."+m] {
				t.Errorf("pkg/api/python/tests defines %s.%s and .ci/expected/python.txt does not name it", c, m)
			}
		}
	}
}

// Every fuzz target in the tree is fuzzed in CI, and every listed one exists.
func TestFuzzListNamesEveryTarget(t *testing.T) {
	listed := map[string]bool{}
	for _, fields := range readList(t, "fuzz.txt") {
		if len(fields) != 3 || !strings.HasSuffix(fields[2], "x") {
			t.Errorf(".ci/expected/fuzz.txt: %q is not \"./package Target inputs\" with a count of inputs such as 30000x", strings.Join(fields, " "))
			continue
		}
		listed[strings.TrimPrefix(fields[0], "./")+" "+fields[1]] = true
	}
	var inTree []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() {
			rel, _ := filepath.Rel(root, path)
			for f := range testFuncs(t, rel) {
				if strings.HasPrefix(f, "Fuzz") {
					inTree = append(inTree, rel+" "+f)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(inTree)
	for _, k := range inTree {
		if !listed[k] {
			t.Errorf("fuzz target %s is not in .ci/expected/fuzz.txt: CI never fuzzes it", k)
		}
		delete(listed, k)
	}
	for k := range listed {
		t.Errorf(".ci/expected/fuzz.txt names %s, which is not in the tree", k)
	}
	if len(inTree) == 0 {
		t.Fatal("found no fuzz target in the tree")
	}
}
