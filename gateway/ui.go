package gateway

import (
	"bytes"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"time"
)

// The web UI: plain HTML, CSS and JavaScript modules embedded in the binary and served at
// /ui/. There is no build step; the pages call the same REST and WebSocket routes as any
// other client (see docs/UI.md). The pages share one opening (ui/head.tmpl), put in when the
// handler is made.

//go:embed ui
var uiFiles embed.FS

// uiCSP lets the pages load only their own scripts and styles, talk only to this origin
// (REST and WebSocket), and play videos only from blob: URLs of files picked on the device.
const uiCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"media-src blob:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// uiLinks are the header's page links, in order.
var uiLinks = []struct{ page, href, text string }{
	{"index.html", "./", "Practice rooms"},
	{"chat.html", "chat.html", "Chat"},
	{"ops.html", "ops.html", "Operations"},
}

// uiHandler serves the embedded pages under /ui/.
func uiHandler() http.Handler {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the embedded tree always has ui/
	}
	pages, err := renderPages(sub)
	if err != nil {
		panic(err) // the embedded pages are fixed at build time; TestUIServed renders them
	}
	files := http.StripPrefix("/ui/", http.FileServerFS(pages))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", uiCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// Pages are small and change with the binary: revalidate instead of caching stale ones.
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// renderPages is ui with each page (*.html) rendered with the shared opening, and the
// template itself (*.tmpl) left out.
func renderPages(ui fs.FS) (fs.FS, error) {
	pages, err := fs.Glob(ui, "*.html")
	if err != nil {
		return nil, err
	}
	out := renderedFS{ui: ui, pages: map[string][]byte{}}
	for _, name := range pages {
		t, err := template.New(name).Funcs(template.FuncMap{"head": pageHead(name)}).ParseFS(ui, "head.tmpl", name)
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if err := t.ExecuteTemplate(&b, name, nil); err != nil {
			return nil, err
		}
		out.pages[name] = b.Bytes()
	}
	return out, nil
}

// pageHead is the head template's data for the page name: its title, script and extra style
// sheets as the page gives them, and the header links with the page's own marked.
func pageHead(name string) func(title, script string, styles ...string) any {
	type link struct {
		Href, Text string
		Current    bool
	}
	return func(title, script string, styles ...string) any {
		var links []link
		for _, l := range uiLinks {
			links = append(links, link{Href: l.href, Text: l.text, Current: l.page == name})
		}
		return struct {
			Title, Script string
			Styles        []string
			Links         []link
		}{title, script, styles, links}
	}
}

// renderedFS serves the rendered pages in place of their templates, and the other files of
// ui as they are.
type renderedFS struct {
	ui    fs.FS
	pages map[string][]byte
}

func (r renderedFS) Open(name string) (fs.File, error) {
	if path.Ext(name) == ".tmpl" {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	page, ok := r.pages[name]
	if !ok {
		return r.ui.Open(name)
	}
	return &renderedPage{Reader: bytes.NewReader(page), name: path.Base(name)}, nil
}

// renderedPage is a rendered page, read from memory.
type renderedPage struct {
	*bytes.Reader // its Size is the page's
	name          string
}

func (p *renderedPage) Stat() (fs.FileInfo, error) { return p, nil }
func (p *renderedPage) Close() error               { return nil }

// The page's fs.FileInfo: no modification time, as for every embedded file.
func (p *renderedPage) Name() string       { return p.name }
func (p *renderedPage) Mode() fs.FileMode  { return 0o444 }
func (p *renderedPage) ModTime() time.Time { return time.Time{} }
func (p *renderedPage) IsDir() bool        { return false }
func (p *renderedPage) Sys() any           { return nil }
