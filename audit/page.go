package audit

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
)

// web is the live page: plain HTML, CSS and JavaScript, served as they are
// (no build step) and embedded so the binary needs nothing beside it.
//
//go:embed web
var web embed.FS

// Handlers returns the live page's handlers, for Serve's extra map:
// "/" serves the page (index.html, app.js, style.css) and /api/summary the
// JSON it polls every second. The page loads nothing from elsewhere; its
// Content-Security-Policy says so to the browser too.
func (a *Auditor) Handlers() map[string]http.Handler {
	sub, err := fs.Sub(web, "web")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(sub)
	return map[string]http.Handler{
		"/": secured(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Cache-Control", "no-cache")
			files.ServeHTTP(w, r)
		})),
		"/api/summary": secured(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, err := json.Marshal(a.live.summary(a.cfg.now(), a.Ready()))
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			_, _ = w.Write(b)
		})),
	}
}

// secured adds headers that keep the page to its own origin: no script,
// style, image or request from anywhere else, no framing, no sniffing.
func secured(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}
