package repocheck

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The README and docs name make targets, environment variables and repository paths; these
// tests hold each to the tree, so a renamed target, a removed variable or a moved file fails
// make test instead of leaving the docs behind the code.

// generated are paths the docs name that a command makes and git ignores, with what makes them.
var generated = map[string]string{
	"deploy/secrets": "make compose-up (the PKI and the admin key)",
	".data":          "make run (the dev store)",
	"bin":            "make tools",
}

// doc is one Markdown file: its path from the root and its text.
type doc struct {
	path, text string
}

func readDocs(t *testing.T) []doc {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	var docs []doc
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		docs = append(docs, doc{rel, string(b)})
	}
	return docs
}

var (
	fence    = regexp.MustCompile("(?ms)^```[^\n]*\n(.*?)^```")
	codeSpan = regexp.MustCompile("`([^`\n]+(?:\n[^`\n]+)?)`")
)

// code returns a doc's code: the lines of its fenced blocks and its code spans (a span may
// break across one line).
func (d doc) code() []string {
	var out []string
	for _, m := range fence.FindAllStringSubmatch(d.text, -1) {
		out = append(out, strings.Split(m[1], "\n")...)
	}
	prose := fence.ReplaceAllString(d.text, "")
	for _, m := range codeSpan.FindAllStringSubmatch(prose, -1) {
		out = append(out, strings.ReplaceAll(m[1], "\n", " "))
	}
	return out
}

var makeTarget = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// makeTargets returns the targets a code line runs with make: `make test`, `make test-cluster
// test-faults`, `VIGIL_INSECURE=1 make compose-up`; a variable assignment or a flag is skipped.
func makeTargets(line string) []string {
	line, _, _ = strings.Cut(line, "#")
	var targets []string
	words := strings.Fields(line)
	for i, w := range words {
		if w != "make" {
			continue
		}
		for _, a := range words[i+1:] {
			if strings.ContainsAny(a, "=") || strings.HasPrefix(a, "-") {
				continue
			}
			if !makeTarget.MatchString(a) {
				break
			}
			targets = append(targets, a)
		}
	}
	return targets
}

var makefileTarget = regexp.MustCompile(`(?m)^([a-zA-Z0-9][a-zA-Z0-9_ .-]*):([^=]|$)`)

func TestDocsNameMakeTargetsThatExist(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for _, m := range makefileTarget.FindAllStringSubmatch(string(b), -1) {
		for _, name := range strings.Fields(m[1]) {
			defined[name] = true
		}
	}
	named := 0
	for _, d := range readDocs(t) {
		for _, line := range d.code() {
			for _, target := range makeTargets(line) {
				named++
				if !defined[target] {
					t.Errorf("%s names `make %s`, and the Makefile has no target %s", d.path, target, target)
				}
			}
		}
	}
	if named == 0 {
		t.Fatal("found no make target in the docs: the test reads nothing")
	}
	t.Logf("%d make commands in the docs, every target defined", named)
}

var envVar = regexp.MustCompile(`\b(?:VIGIL|REDIS)_[A-Z0-9_]*[A-Z0-9*]\b\*?`)

// sourceEnvVars returns every VIGIL_* and REDIS_* word in the tree's code, scripts, manifests
// and the Makefile (Markdown left out: the docs cannot vouch for themselves).
func sourceEnvVars(t *testing.T) map[string]bool {
	t.Helper()
	found := map[string]bool{}
	code := regexp.MustCompile(`\b(?:VIGIL|REDIS)_[A-Z0-9_]*[A-Z0-9]\b`)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == ".git" || name == "bin" || name == ".data" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(name) {
		case ".go", ".sh", ".yaml", ".yml", ".py", ".js", ".lua", ".conf", ".env", ".json":
		default:
			if name != "Makefile" && name != "Dockerfile" && name != "run" && name != "gotest" && name != "fuzz" {
				return nil
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, v := range code.FindAllString(string(b), -1) {
			found[v] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func TestDocsNameEnvironmentVariablesThatExist(t *testing.T) {
	inCode := sourceEnvVars(t)
	named := 0
	for _, d := range readDocs(t) {
		seen := map[string]bool{}
		for _, v := range envVar.FindAllString(d.text, -1) {
			if seen[v] {
				continue
			}
			seen[v] = true
			named++
			if prefix, ok := strings.CutSuffix(v, "*"); ok {
				if !anyWithPrefix(inCode, prefix) {
					t.Errorf("%s names %s, and no variable of the code starts with %s", d.path, v, prefix)
				}
				continue
			}
			if !inCode[v] {
				t.Errorf("%s names %s, which no code, script or manifest reads or sets", d.path, v)
			}
		}
	}
	if named == 0 {
		t.Fatal("found no environment variable in the docs: the test reads nothing")
	}
	t.Logf("%d environment variables named in the docs (%d in the code)", named, len(inCode))
}

func anyWithPrefix(set map[string]bool, prefix string) bool {
	for v := range set {
		if strings.HasPrefix(v, prefix) {
			return true
		}
	}
	return false
}

var (
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	braces = regexp.MustCompile(`\{([^{}]*,[^{}]*)\}`)
	angles = regexp.MustCompile(`<[^<>/]+>`)
	// goIdent is an exported Go name after a package's path.
	goIdent = regexp.MustCompile(`\.[A-Z]\w*(\.\w+)?(\(.*)?$`)
)

// topDirs are the repository's top-level entries: a code word that starts with one of them
// and a slash is a path in the tree.
func topDirs(t *testing.T) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() && e.Name() != ".git" {
			dirs[e.Name()] = true
		}
	}
	return dirs
}

// repoPath returns the path a code word names in the tree, or "" when it names none: it
// starts (after ./) with a top-level directory and a slash, or is a top-level file.
func repoPath(word string, dirs map[string]bool) string {
	word = strings.TrimLeft(word, "\"'(")
	word = strings.TrimRight(word, "\"'(),;:")
	word = strings.TrimSuffix(word, "'s")
	word = strings.TrimPrefix(word, "./")
	if i := strings.IndexAny(word, "#?"); i >= 0 {
		word = word[:i]
	}
	word = strings.TrimSuffix(strings.TrimSuffix(word, "/..."), "/")
	word = goIdent.ReplaceAllString(word, "") // pkg/redisx.Tag is the package pkg/redisx
	first, _, ok := strings.Cut(word, "/")
	if !ok || !dirs[first] || strings.Contains(word, "://") || strings.ContainsAny(word, "$@=") {
		return ""
	}
	return word
}

// expand returns the globs a path with {a,b} sets and <placeholders> stands for.
func expand(p string) []string {
	if m := braces.FindStringSubmatchIndex(p); m != nil {
		var out []string
		for _, alt := range strings.Split(p[m[2]:m[3]], ",") {
			out = append(out, expand(p[:m[0]]+alt+p[m[1]:])...)
		}
		return out
	}
	return []string{angles.ReplaceAllString(p, "*")}
}

// exists reports whether a path (with globs) names something in the tree or something a
// command makes (generated).
func exists(p string) bool {
	for prefix := range generated {
		if p == prefix || strings.HasPrefix(p, prefix+"/") {
			return true
		}
	}
	for _, g := range expand(p) {
		if m, _ := filepath.Glob(filepath.Join(root, g)); len(m) == 0 {
			return false
		}
	}
	return true
}

func TestDocsNamePathsThatExist(t *testing.T) {
	dirs := topDirs(t)
	named := 0
	for _, d := range readDocs(t) {
		var missing []string
		seen := map[string]bool{}
		check := func(p string) {
			if p == "" || seen[p] {
				return
			}
			seen[p] = true
			named++
			if !exists(p) {
				missing = append(missing, p)
			}
		}
		for _, line := range d.code() {
			if strings.Contains(line, "kubectl ") {
				continue // deploy/reservations is a Kubernetes object there
			}
			for _, w := range strings.Fields(line) {
				check(repoPath(w, dirs))
			}
		}
		for _, m := range mdLink.FindAllStringSubmatch(d.text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			rel, err := filepath.Rel(root, filepath.Join(root, filepath.Dir(d.path), target))
			if err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s links %s, outside the repository", d.path, m[1])
				continue
			}
			check(filepath.ToSlash(rel))
		}
		sort.Strings(missing)
		for _, p := range missing {
			t.Errorf("%s names %s, which is not in the tree", d.path, p)
		}
	}
	if named == 0 {
		t.Fatal("found no path in the docs: the test reads nothing")
	}
	t.Logf("%d repository paths named in the docs", named)
}

func TestRepoPath(t *testing.T) {
	dirs := map[string]bool{"pkg": true, "services": true, ".ci": true}
	for in, want := range map[string]string{
		"./pkg/alarm/...":             "pkg/alarm",
		"pkg/api/python/README.md#x":  "pkg/api/python/README.md",
		"services/<name>/cmd/":        "services/<name>/cmd",
		".ci/run":                     ".ci/run",
		"/ui/ops.html":                "",
		"orders/42":                   "",
		"https://pkg/x":               "",
		"(pkg/clock),":                "pkg/clock",
		"internal/{domain,app}":       "",
		"pkg/redisx.Tag":              "pkg/redisx",
		"pkg/alarm's":                 "pkg/alarm",
		"pkg/x/service.New(ctx,":      "pkg/x/service",
		"pkg/api/python/setup.py":     "pkg/api/python/setup.py",
		"$(BIN)/testcheck":            "",
		"VIGIL_X=pkg/y":               "",
		"services/{chat,locks}/cmd/x": "services/{chat,locks}/cmd/x",
	} {
		if got := repoPath(in, dirs); got != want {
			t.Errorf("repoPath(%q) = %q, want %q", in, got, want)
		}
	}
	if got := expand("services/{chat,locks}/<x>.go"); strings.Join(got, " ") != "services/chat/*.go services/locks/*.go" {
		t.Errorf("expand = %q", got)
	}
}
