package gateway

import (
	"context"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// apiDoc is the contract page this package is held to.
const apiDoc = "../docs/API.md"

// docRoute is a table row of API.md that names a route in its first cell.
var docRoute = regexp.MustCompile("^\\| `(GET|POST|DELETE|PUT|PATCH) (/[^`?]*)[^`]*` \\|([^|]*)\\|")

// routeOfPattern is how API.md writes a registered pattern.
func routeOfPattern(p string) string { return strings.Replace(p, "/{$}", "/", 1) }

// TestAPIDocMatchesTheGateway holds docs/API.md to the routes the gateway registers: its
// "Routes and scopes" table lists every registered route (every path and method of
// /openapi.json, every WebSocket route, the gateway's own) with the scope routeScopes gives it,
// every route the page names anywhere is registered, and every WebSocket route has a row whose
// body cell says "WebSocket".
func TestAPIDocMatchesTheGateway(t *testing.T) {
	doc, err := os.ReadFile(apiDoc)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(context.Background(), Options{Backends: allBackends, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)

	registered := map[string]string{} // route as API.md writes it -> pattern
	for _, p := range g.router.patterns {
		if p != "/" {
			registered[routeOfPattern(p)] = p
		}
	}
	index := map[string]string{}   // route -> scope, from the "Routes and scopes" table
	websocket := map[string]bool{} // routes a row describes as a WebSocket
	section := ""
	for line := range strings.SplitSeq(string(doc), "\n") {
		if strings.HasPrefix(line, "## ") {
			section = strings.TrimPrefix(line, "## ")
			continue
		}
		m := docRoute.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		route := m[1] + " " + m[2]
		if _, ok := registered[route]; !ok {
			t.Errorf("API.md (%s) names %s, which the gateway does not register", section, route)
		}
		if strings.Contains(line, "| WebSocket |") {
			websocket[route] = true
		}
		if section == "Routes and scopes" {
			if _, dup := index[route]; dup {
				t.Errorf("API.md lists %s twice in Routes and scopes", route)
			}
			index[route] = strings.TrimSpace(m[3])
		}
	}
	if len(index) == 0 {
		t.Fatal(`API.md has no "Routes and scopes" table`)
	}

	for route, pattern := range registered {
		scope, ok := index[route]
		if !ok {
			t.Errorf("the gateway registers %s, which API.md's Routes and scopes does not list", route)
			continue
		}
		if want := routeScopes[pattern]; scope != want {
			t.Errorf("API.md gives %s the scope %q; the gateway's table says %q", route, scope, want)
		}
	}
	for tag, routes := range restRoutes() {
		for _, r := range routes {
			if _, ok := index[r]; !ok {
				t.Errorf("openapi.json's %s route %s is not in API.md", tag, r)
			}
		}
	}
	// A WebSocket route answers a plain request 426 before it calls anything.
	var sockets []string
	for route, pattern := range registered {
		method, path := concretePath(pattern)
		if method != http.MethodGet {
			continue
		}
		rec := httptest.NewRecorder()
		g.Handler().ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		if rec.Code == http.StatusUpgradeRequired {
			sockets = append(sockets, route)
			if !websocket[route] {
				t.Errorf("%s is a WebSocket route; API.md never describes it as one", route)
			}
		}
	}
	for route := range websocket {
		if !slices.Contains(sockets, route) {
			t.Errorf("API.md describes %s as a WebSocket, but a plain request to it is not refused with 426", route)
		}
	}
	if len(sockets) < 2 {
		t.Errorf("found WebSocket routes %v, want the chat and room sockets", sockets)
	}
}

// mdLink is a relative link in Markdown: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)

// TestDocsStayInTheRepository: no document points outside the repository, to the design notes
// the project started from or to a path that does not exist.
func TestDocsStayInTheRepository(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "node_modules", ".data", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".md") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		// The design notes the project started from lie beside the repository, not in it.
		if outside := "shared" + "/design"; strings.Contains(string(b), outside) {
			t.Errorf("%s points to %s, outside the repository", rel, outside)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			abs := filepath.Join(filepath.Dir(path), target)
			if r, err := filepath.Rel(root, abs); err != nil || strings.HasPrefix(r, "..") {
				t.Errorf("%s links to %s, outside the repository", rel, target)
				continue
			}
			if _, err := os.Stat(abs); err != nil {
				t.Errorf("%s links to %s, which does not exist", rel, target)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
