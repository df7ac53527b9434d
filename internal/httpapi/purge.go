package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// purgeJobs: DELETE /v1/topics/{topic}/jobs?state=S → {"deleted":n}:
// deletes the topic's jobs in state S (required), in any state's
// reservation, as many as there were when the call began.
func (h *handler) purgeJobs(w http.ResponseWriter, r *http.Request) {
	topic, err := pathTopic(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	n, err := h.e.Purge(r.Context(), topic, delayq.State(r.URL.Query().Get("state")))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	noteAudit(r, slog.String("state", r.URL.Query().Get("state")), slog.Int("deleted", n))
	writeJSON(w, http.StatusOK, api.PurgeResponse{Deleted: n})
}
