package httpapi

import (
	"net/http"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/schedule"
)

// nextShown is how many next fire times a schedule shows.
const nextShown = 5

// scheduleRoutes registers the periodic jobs' endpoints, when the server
// runs schedules (Options.Schedules).
func (h *handler) scheduleRoutes() {
	if h.opts.Schedules == nil {
		return
	}
	m := h.mux
	m.HandleFunc("GET /v1/schedules", h.listSchedules)
	m.HandleFunc("PUT /v1/schedules/{name}", h.putSchedule)
	m.HandleFunc("GET /v1/schedules/{name}", h.getSchedule)
	m.HandleFunc("DELETE /v1/schedules/{name}", h.deleteSchedule)
	m.HandleFunc("POST /v1/schedules/{name}/pause", h.pauseSchedule)
	m.HandleFunc("POST /v1/schedules/{name}/resume", h.resumeSchedule)
}

// putSchedule: PUT /v1/schedules/{name} → 201 created or 200 replaced,
// with the schedule.
func (h *handler) putSchedule(w http.ResponseWriter, r *http.Request) {
	var req api.ScheduleRequest
	if err := decode(w, r, h.oneJobBytes, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	d, err := toDef(r.PathValue("name"), &req)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	sc, created, err := h.opts.Schedules.Put(r.Context(), d)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, putStatus(created), h.toSchedule(sc))
}

// toDef turns a wire schedule into a definition; the service validates it.
func toDef(name string, req *api.ScheduleRequest) (schedule.Def, error) {
	body, err := api.DecodeBody(req.Body, req.BodyBase64)
	if err != nil {
		return schedule.Def{}, err
	}
	d := schedule.Def{
		Name: name, Topic: req.Topic, Cron: req.Cron, Body: body, Priority: req.Priority,
		Timezone: req.Timezone, Missed: req.Missed,
	}
	if req.Every != nil {
		d.Every = time.Duration(*req.Every)
		if d.Every == 0 {
			return schedule.Def{}, delayq.Invalid(delayq.CodeBadEvery, "every", "0 is not an interval")
		}
	}
	if req.TTR != nil {
		d.TTR = time.Duration(*req.TTR)
		if d.TTR == 0 { // 0 would read as "default"; refuse it as a put does
			return schedule.Def{}, delayq.Invalid(delayq.CodeBadTTR, "ttr", "0s is under the minimum of %s", delayq.MinTTR)
		}
	}
	if req.MaxAttempts != nil {
		d.MaxAttempts = *req.MaxAttempts
	}
	return d, nil
}

// getSchedule: GET /v1/schedules/{name}.
func (h *handler) getSchedule(w http.ResponseWriter, r *http.Request) {
	sc, err := h.opts.Schedules.Get(r.Context(), r.PathValue("name"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h.toSchedule(sc))
}

// listSchedules: GET /v1/schedules → {"schedules":[...]}, by name.
func (h *handler) listSchedules(w http.ResponseWriter, r *http.Request) {
	all, err := h.opts.Schedules.List(r.Context())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	resp := api.SchedulesResponse{Schedules: make([]api.Schedule, 0, len(all))}
	for _, sc := range all {
		resp.Schedules = append(resp.Schedules, h.toSchedule(sc))
	}
	writeJSON(w, http.StatusOK, resp)
}

// deleteSchedule: DELETE /v1/schedules/{name} → 204. Jobs it put stay.
func (h *handler) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	if err := h.opts.Schedules.Delete(r.Context(), r.PathValue("name")); err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// pauseSchedule: POST /v1/schedules/{name}/pause → the schedule.
func (h *handler) pauseSchedule(w http.ResponseWriter, r *http.Request) { h.setPaused(w, r, true) }

// resumeSchedule: POST /v1/schedules/{name}/resume → the schedule.
func (h *handler) resumeSchedule(w http.ResponseWriter, r *http.Request) { h.setPaused(w, r, false) }

func (h *handler) setPaused(w http.ResponseWriter, r *http.Request, paused bool) {
	sc, err := h.opts.Schedules.SetPaused(r.Context(), r.PathValue("name"), paused)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h.toSchedule(sc))
}

// toSchedule is a schedule on the wire, with its next fire times.
func (h *handler) toSchedule(sc *schedule.Schedule) api.Schedule {
	tz := sc.Timezone
	if tz == "" {
		tz = "UTC"
	}
	w := api.Schedule{
		Name: sc.Name, Topic: sc.Topic, Cron: sc.Spec, Timezone: tz, Missed: sc.Missed,
		TTR: sc.TTR.Seconds(), Priority: sc.Priority, MaxAttempts: sc.MaxAttempts, Paused: sc.Paused,
		Created: api.Time{Time: sc.Created}, Updated: api.Time{Time: sc.Updated}, Next: []api.Time{},
	}
	w.Body, w.BodyBase64 = api.EncodeBody(sc.Body)
	if !sc.Last.IsZero() {
		w.Last = &api.Time{Time: sc.Last}
	}
	for _, t := range h.opts.Schedules.Next(sc, nextShown) {
		w.Next = append(w.Next, api.Time{Time: t})
	}
	return w
}
