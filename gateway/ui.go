package gateway

import (
	"embed"
	"io/fs"
	"net/http"
)

// The web UI: plain HTML, CSS and JavaScript modules embedded in the binary and served at
// /ui/. There is no build step; the pages call the same REST and WebSocket routes as any
// other client (see docs/UI.md).

//go:embed ui
var uiFiles embed.FS

// uiCSP lets the pages load only their own scripts and styles, talk only to this origin
// (REST and WebSocket), and play videos only from blob: URLs of files picked on the device.
const uiCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"media-src blob:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// uiHandler serves the embedded pages under /ui/.
func uiHandler() http.Handler {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the embedded tree always has ui/
	}
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
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
