package gateway

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
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
	imp := regexp.MustCompile(`from '\./([a-z0-9.-]+\.js)'`)
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
			queue = append(queue, m[1])
		}
	}
	for _, name := range []string{"index.html", "lobby.js", "room.js", "chat.js", "common.js", "app.css"} {
		if !seen[name] && !(name == "index.html" && seen[""]) {
			t.Errorf("%s is not reachable from the pages", name)
		}
	}

	res, err := http.Get(srv.URL + "/ui/no-such-page.html")
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /ui/no-such-page.html = %d, want 404", res.StatusCode)
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
