// Package dashboard serves the operator's web dashboard at /ui/: a page of
// topics with their counts, a topic's jobs by state, a job's detail, and the
// actions an operator needs (delete, kick, run now, reschedule).
//
// It is static HTML, CSS and JavaScript embedded in the binary, with no
// build step. The page reaches delayq only through the public v1 HTTP API of
// the same origin, so it owns no state and needs nothing from the engine;
// internal/httpapi mounts it (httpapi.Options.UI).
package dashboard

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Prefix is the path the dashboard is served under.
const Prefix = "/ui/"

// contentSecurityPolicy lets the page load only its own files and talk only
// to its own origin: even if some data slipped into the DOM as markup, no
// inline script would run.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"

// Handler returns the dashboard. It expects the full request path (/ui/...),
// as a mux pattern "/ui/" passes it, and serves GET and HEAD only; unknown
// files answer 404.
func Handler() http.Handler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic("dashboard: " + err.Error()) // the embed directive names the directory
	}
	fileServer := http.StripPrefix(Prefix[:len(Prefix)-1], http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the dashboard is read-only: use GET", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == Prefix[:len(Prefix)-1] {
			// Relative asset links need the trailing slash.
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// Embedded files carry no modification time; make browsers ask
		// again so an upgraded server is never paired with stale scripts.
		h.Set("Cache-Control", "no-cache")
		fileServer.ServeHTTP(w, r)
	})
}
