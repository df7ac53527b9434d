package httpapi

import (
	"io"
	"net/http"
	"time"
)

// backup streams a consistent copy of the embedded store as a tar archive
// (GET /v1/backup). Until the first byte is written an error is still a
// JSON error; after that a failure can only cut the stream, which the
// archive's missing end marker makes visible to `delayq backup`.
func (h *handler) backup(w http.ResponseWriter, r *http.Request) {
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
