package gateway

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"
)

// TestUIServed: every page and every file a page references is served from the embedded tree,
// with the content type a browser needs (module scripts must be JavaScript) and the UI's
// security headers.
func TestUIServed(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(uiHandler())
	t.Cleanup(srv.Close)

	ref := regexp.MustCompile(`(?:src|href)="([a-z][a-z0-9.-]*\.(?:js|css|html))"`)
	// A module's imports (import ... from './x.js', import '../y.js'), resolved against its folder.
	imp := regexp.MustCompile(`(?:from|import) '(\.\.?/[a-z0-9./-]+\.js)'`)
	wantType := map[string]string{".html": "text/html", ".js": "text/javascript", ".css": "text/css"}
	seen := map[string]bool{}
	queue := []string{"", "room.html", "chat.html"}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		res, err := http.Get(srv.URL + "/ui/" + name)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET /ui/%s = %d, want 200", name, res.StatusCode)
			continue
		}
		ext := ".html"
		if i := strings.LastIndex(name, "."); i >= 0 {
			ext = name[i:]
		}
		if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, wantType[ext]) {
			t.Errorf("GET /ui/%s: Content-Type %q, want %s", name, ct, wantType[ext])
		}
		if csp := res.Header.Get("Content-Security-Policy"); csp != uiCSP {
			t.Errorf("GET /ui/%s: Content-Security-Policy %q, want %q", name, csp, uiCSP)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET /ui/%s: no X-Content-Type-Options: nosniff", name)
		}
		for _, m := range ref.FindAllStringSubmatch(string(body), -1) {
			queue = append(queue, m[1])
		}
		for _, m := range imp.FindAllStringSubmatch(string(body), -1) {
			queue = append(queue, strings.TrimPrefix(path.Join(path.Dir("/"+name), m[1]), "/"))
		}
	}
	for _, name := range []string{"index.html", "boot.js", "lobby.js", "room.js", "chat.js", "common.js", "app.css", "formation.js",
		"room/state.js", "room/socket.js", "room/follow.js", "room/keys.js", "room/camera.js"} {
		if !seen[name] && !(name == "index.html" && seen[""]) {
			t.Errorf("%s is not reachable from the pages", name)
		}
	}

	// Not served: a missing page, and the pages' shared opening (a template, not a page).
	for _, name := range []string{"no-such-page.html", "head.tmpl"} {
		res, err := http.Get(srv.URL + "/ui/" + name)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("GET /ui/%s = %d, want 404", name, res.StatusCode)
		}
	}
}

// TestUIPagesShareTheOpening: every page is served with the shared opening (ui/head.tmpl)
// filled in: its title, its script, its header link marked as the current page (the room
// page has none), and no template text left.
func TestUIPagesShareTheOpening(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(uiHandler())
	t.Cleanup(srv.Close)
	for _, tc := range []struct{ page, title, script, current string }{
		{"", "Practice rooms", "lobby.js", `<a href="./" aria-current="page">`},
		{"room.html", "Practice room", "room.js", ""},
		{"chat.html", "Chat", "chat.js", `<a href="chat.html" aria-current="page">`},
		{"ops.html", "Operations", "ops.js", `<a href="ops.html" aria-current="page">`},
	} {
		res, err := http.Get(srv.URL + "/ui/" + tc.page)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		body := string(b)
		for _, want := range []string{"<!doctype html>\n", "<title>" + tc.title + " · Vigil</title>", `<script type="module" src="` + tc.script + `"></script>`, "<noscript>"} {
			if !strings.Contains(body, want) {
				t.Errorf("GET /ui/%s does not hold %q", tc.page, want)
			}
		}
		if n := strings.Count(body, `aria-current="page"`); (tc.current == "" && n != 0) || (tc.current != "" && (n != 1 || !strings.Contains(body, tc.current))) {
			t.Errorf("GET /ui/%s marks %d links current, want only %q", tc.page, n, tc.current)
		}
		if strings.Contains(body, "{{") {
			t.Errorf("GET /ui/%s holds template text", tc.page)
		}
	}
}

// TestUINoHTMLSinks: the pages put user data in only as text. No file may use an API that
// parses a string as HTML or runs it as code.
func TestUINoHTMLSinks(t *testing.T) {
	t.Parallel()
	sinks := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|srcdoc|\son[a-z]+="`)
	err := fs.WalkDir(uiFiles, "ui", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := uiFiles.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := sinks.FindString(line); m != "" {
				t.Errorf("%s:%d uses %s", path, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRootRedirectsBrowsers: a browser opening / lands on the UI; a program gets JSON.
func TestRootRedirectsBrowsers(t *testing.T) {
	t.Parallel()
	srv := startGateway(t, Backends{})
	root := call(t, "GET", srv.URL+"/", "")
	if root.code != 200 || root.body["service"] != "vigil" {
		t.Fatalf("GET / = %d %s, want 200 {service: vigil}", root.code, root.raw)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("GET", srv.URL+"/", nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusFound || res.Header.Get("Location") != "/ui/" {
		t.Errorf("GET / from a browser = %d to %q, want 302 to /ui/", res.StatusCode, res.Header.Get("Location"))
	}
	res, err = http.Get(srv.URL + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "<title>Practice rooms") {
		t.Errorf("GET /ui/ through the gateway = %d, want 200 and the lobby page", res.StatusCode)
	}
}
