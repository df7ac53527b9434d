package httpapi

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/delayq/delayq"
)

// backup streams a consistent copy of the embedded store as a tar archive
// (GET /v1/backup). Until the first byte is written an error is still a
// JSON error; after that a failure can only cut the stream, which the
// archive's missing end marker makes visible to `delayq backup`.
//
// A checkpoint holds every job, so a request a browser sends on behalf of
// another site is refused (crossSite): http.CrossOriginProtection, which
// guards the API's writes, lets every GET through, and a page could
// otherwise start a download of the whole store (a GET that needs no
// token when the server has none). With tokens the route needs admin on
// every topic as well (middleware.go).
func (h *handler) backup(w http.ResponseWriter, r *http.Request) {
	if why := crossSite(r); why != "" {
		h.writeError(w, r, &httpError{http.StatusForbidden, delayq.CodeCrossSite,
			"a backup is not served to a request from another site (" + why + "); fetch it with `delayq backup` or from this server's own pages"})
		return
	}
	fw := &firstWrite{w: w}
	err := h.e.Backup(r.Context(), fw)
	if err == nil {
		return
	}
	if !fw.started {
		h.writeError(w, r, err)
		return
	}
	h.log.Error("backup stream cut", "err", err)
	panic(http.ErrAbortHandler) // close the connection: the client sees a truncated archive
}

// firstWrite sets the archive headers at the first write, so an error
// before it can still be answered as JSON.
type firstWrite struct {
	w       http.ResponseWriter
	started bool
}

func (f *firstWrite) Write(p []byte) (int, error) {
	if !f.started {
		f.started = true
		h := f.w.Header()
		h.Set("Content-Type", "application/x-tar")
		h.Set("Content-Disposition", `attachment; filename="delayq-backup-`+time.Now().UTC().Format("20060102T150405Z")+`.tar"`)
		f.w.WriteHeader(http.StatusOK)
	}
	return f.w.Write(p)
}

var _ io.Writer = (*firstWrite)(nil)

// crossSite says why r comes from a page of another site, or "". Browsers
// send Sec-Fetch-Site on every request (same-origin, same-site,
// cross-site, or none for a URL the user typed); older ones send Origin
// on some. A request with neither is not a browser's on behalf of a page
// (curl, `delayq backup`), and passes.
func crossSite(r *http.Request) string {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return "Sec-Fetch-Site: " + site
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	u, err := url.Parse(origin)
	if err != nil || !strings.EqualFold(u.Host, r.Host) {
		return "Origin: " + origin
	}
	return ""
}
