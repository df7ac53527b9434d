package httpapi

import (
	"net/http"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/alarm"
)

// alarmRoutes registers the alarms' endpoints, when the server runs
// alarms (Options.Alarms).
func (h *handler) alarmRoutes() {
	if h.opts.Alarms == nil {
		return
	}
	m := h.mux
	m.HandleFunc("GET /v1/alarms", h.listAlarms)
	m.HandleFunc("PUT /v1/alarms/{name}", h.putAlarm)
	m.HandleFunc("GET /v1/alarms/{name}", h.getAlarm)
	m.HandleFunc("DELETE /v1/alarms/{name}", h.deleteAlarm)
}

// alarmBytes bounds a PUT /v1/alarms body: a URL, up to 100 globs and
// 8 KiB of headers.
const alarmBytes = 64 << 10

// putAlarm: PUT /v1/alarms/{name} → 201 created or 200 replaced, with the
// alarm. Bad input is refused before anything is stored.
func (h *handler) putAlarm(w http.ResponseWriter, r *http.Request) {
	var req api.AlarmRequest
	if err := decode(w, r, alarmBytes, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	a, err := alarm.FromRequest(r.PathValue("name"), &req)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	a, created, err := h.opts.Alarms.Put(r.Context(), a)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.writeAlarm(w, r, putStatus(created), a)
}

// getAlarm: GET /v1/alarms/{name}, with its state per topic.
func (h *handler) getAlarm(w http.ResponseWriter, r *http.Request) {
	a, err := h.opts.Alarms.Get(r.Context(), r.PathValue("name"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.writeAlarm(w, r, http.StatusOK, a)
}

func (h *handler) writeAlarm(w http.ResponseWriter, r *http.Request, status int, a *alarm.Alarm) {
	wa, err := h.toAlarm(r, a)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, status, wa)
}

// listAlarms: GET /v1/alarms → {"alarms":[...]}, by name, with state.
func (h *handler) listAlarms(w http.ResponseWriter, r *http.Request) {
	all, err := h.opts.Alarms.List(r.Context())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	resp := api.AlarmsResponse{Alarms: make([]api.Alarm, 0, len(all))}
	for _, a := range all {
		wa, err := h.toAlarm(r, a)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		resp.Alarms = append(resp.Alarms, wa)
	}
	writeJSON(w, http.StatusOK, resp)
}

// deleteAlarm: DELETE /v1/alarms/{name} → 204.
func (h *handler) deleteAlarm(w http.ResponseWriter, r *http.Request) {
	if err := h.opts.Alarms.Delete(r.Context(), r.PathValue("name")); err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// toAlarm is an alarm on the wire with its conditions' state.
func (h *handler) toAlarm(r *http.Request, a *alarm.Alarm) (api.Alarm, error) {
	req := a.Request()
	wa := api.Alarm{
		Name: a.Name, URL: a.URL, Topics: req.Topics, When: req.When, Repeat: req.Repeat,
		Secret: req.Secret, Headers: req.Headers, Format: req.Format, // the secret masked
		Created: api.Time{Time: a.Created}, Updated: api.Time{Time: a.Updated},
		State: "ok", Conditions: []api.AlarmCondition{},
	}
	if wa.Topics == nil {
		wa.Topics = []string{}
	}
	conds, err := h.opts.Alarms.Status(r.Context(), a.Name)
	if err != nil {
		return api.Alarm{}, err
	}
	for _, c := range conds {
		ac := api.AlarmCondition{Topic: c.Topic, Condition: c.Condition, Value: c.Value, Threshold: c.Threshold, Firing: c.Firing}
		if c.Firing {
			ac.Since = &api.Time{Time: c.Since}
			wa.State = alarm.StateFiring
		}
		wa.Conditions = append(wa.Conditions, ac)
	}
	return wa, nil
}
