package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq/internal/audit"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/metrics"
)

// ObserveOptions configure Observe.
type ObserveOptions struct {
	// Logger receives the audit records (always) and the access log (when
	// AccessLog is set). Default slog.Default().
	Logger *slog.Logger
	// AccessLog logs one record per request: method, route, status,
	// bytes, duration, principal, remote address (--access-log).
	AccessLog bool
}

// Observe wraps the whole HTTP stack (outside Guard, so refusals are seen
// too) with what operators watch: the audit record of every request that
// changes something outside the job hot path (auditRoutes), the request
// duration histogram delayq_http_request_duration_seconds{route,method,
// code}, and the opt-in access log. Routes are named by their pattern
// ("/v1/jobs/{id}"), never the raw path, so the label set is bounded: a
// path no route serves is "unmatched".
func Observe(e *engine.Engine, next http.Handler, o ObserveOptions) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	ob := &observer{next: next, o: o, met: e.Metrics(), routes: http.NewServeMux()}
	for _, gr := range guardRules {
		pattern := gr.pattern
		ob.routes.HandleFunc(pattern, func(_ http.ResponseWriter, r *http.Request) {
			if in := infoOf(r.Context()); in != nil {
				in.pattern = pattern
				in.topic, in.id, in.name = r.PathValue("topic"), r.PathValue("id"), r.PathValue("name")
			}
		})
	}
	return ob
}

type observer struct {
	next   http.Handler
	o      ObserveOptions
	met    *metrics.Metrics
	routes *http.ServeMux // guardRules' patterns, to name a request's route
}

// reqInfo is what Observe learns about one request while it runs: its
// route (from observer.routes), its caller (set by Guard) and notes the
// handler adds to its audit record.
type reqInfo struct {
	actor           audit.Actor
	pattern         string // "" when no route serves the request
	topic, id, name string // the route's path values
	extra           []slog.Attr
}

type infoKey struct{}

func infoOf(ctx context.Context) *reqInfo {
	in, _ := ctx.Value(infoKey{}).(*reqInfo)
	return in
}

// noteAudit adds attrs to the audit record of r's request (a purge's
// count, a kick's count), when Observe runs.
func noteAudit(r *http.Request, attrs ...slog.Attr) {
	if in := infoOf(r.Context()); in != nil {
		in.extra = append(in.extra, attrs...)
	}
}

// setPrincipal records who r's caller is, once Guard knows.
func setPrincipal(r *http.Request, name string) {
	if in := infoOf(r.Context()); in != nil {
		in.actor.Principal = name
	}
}

// auditTarget names what an audited route changes, from its path values
// (and the purge's state).
type auditTarget func(in *reqInfo, r *http.Request) string

func topicTarget(in *reqInfo, _ *http.Request) string { return "topic:" + in.topic }
func jobTarget(in *reqInfo, _ *http.Request) string   { return "job:" + in.id }
func scheduleTarget(in *reqInfo, _ *http.Request) string {
	return "schedule:" + in.name
}
func alarmTarget(in *reqInfo, _ *http.Request) string { return "alarm:" + in.name }

// auditRoutes are the /v1 routes that change something outside the job
// hot path, with the action each records. Put, reserve, finish, release,
// touch and bury of a held job are the hot path and are not audited; a
// DELETE of a job is an operator's revoke (it needs no reservation), so it
// is.
var auditRoutes = map[string]struct {
	action string
	target auditTarget
}{
	"DELETE /v1/jobs/{id}":             {"job.delete", jobTarget},
	"PATCH /v1/jobs/{id}":              {"job.update", jobTarget},
	"POST /v1/jobs/{id}/kick":          {"job.kick", jobTarget},
	"POST /v1/topics/{topic}/kick":     {"topic.kick", topicTarget},
	"DELETE /v1/topics/{topic}/jobs":   {"topic.purge", topicTarget},
	"POST /v1/topics/{topic}/pause":    {"topic.pause", topicTarget},
	"POST /v1/topics/{topic}/resume":   {"topic.resume", topicTarget},
	"PUT /v1/topics/{topic}/policy":    {"policy.put", topicTarget},
	"DELETE /v1/topics/{topic}/policy": {"policy.delete", topicTarget},
	"PUT /v1/schedules/{name}":         {"schedule.put", scheduleTarget},
	"DELETE /v1/schedules/{name}":      {"schedule.delete", scheduleTarget},
	"POST /v1/schedules/{name}/pause":  {"schedule.pause", scheduleTarget},
	"POST /v1/schedules/{name}/resume": {"schedule.resume", scheduleTarget},
	"PUT /v1/alarms/{name}":            {"alarm.put", alarmTarget},
	"DELETE /v1/alarms/{name}":         {"alarm.delete", alarmTarget},
	"GET /v1/backup":                   {"backup", func(*reqInfo, *http.Request) string { return "store" }},
}

// Route labels for requests no route serves, and methods outside the
// known set: a client must not be able to mint label values.
const (
	routeUnmatched = "unmatched"
	methodOther    = "other"
)

var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

func (ob *observer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	in := &reqInfo{actor: audit.Actor{Protocol: "http", Remote: r.RemoteAddr}}
	ctx := context.WithValue(r.Context(), infoKey{}, in)
	ctx = audit.WithActor(ctx, &in.actor)
	r = r.WithContext(ctx)
	ob.routes.ServeHTTP(nowhere{}, r) // fills in.pattern and the path values
	r.Pattern = ""

	ar, audited := auditRoutes[in.pattern]
	rec := &recorder{ResponseWriter: w, keepError: audited}
	ob.next.ServeHTTP(rec, r)
	if rec.status == 0 {
		rec.status = http.StatusOK // nothing written: net/http answers 200
	}
	d := time.Since(start)

	route, method := routeUnmatched, methodOther
	if in.pattern != "" {
		route = in.pattern[strings.IndexByte(in.pattern, ' ')+1:] // "GET /x" → "/x"; "/ui/" stays
	}
	if knownMethods[r.Method] {
		method = r.Method
	}
	code := strconv.Itoa(rec.status)
	ob.met.HTTPRequest(route, method, code, d)

	if audited {
		outcome := audit.OK
		if rec.status >= 400 {
			outcome = rec.errorCode()
		}
		audit.Log(ctx, ob.o.Logger, &in.actor, ar.action, ar.target(in, r), outcome,
			append([]slog.Attr{slog.Int("status", rec.status)}, in.extra...)...)
	}
	if ob.o.AccessLog {
		accessLog(ctx, ob.o.Logger, r, route, rec, d, &in.actor)
	}
}

// accessLog writes one access record, whatever the log level: the
// operator asked for it with --access-log.
func accessLog(ctx context.Context, log *slog.Logger, r *http.Request, route string, rec *recorder, d time.Duration, a *audit.Actor) {
	lr := slog.NewRecord(time.Now(), slog.LevelInfo, "http request", 0)
	lr.AddAttrs(slog.Bool("access", true), slog.String("method", r.Method), slog.String("route", route),
		slog.Int("status", rec.status), slog.Int64("bytes", rec.bytes), slog.Duration("duration", d),
		slog.String("principal", a.Principal), slog.String("remote", a.Remote))
	_ = log.Handler().Handle(ctx, lr)
}

// recorder notes a response's status and size, and keeps the start of an
// error answer of an audited route to learn its code.
type recorder struct {
	http.ResponseWriter
	status    int
	bytes     int64
	keepError bool
	errBody   []byte
}

// maxErrBody is how much of an error answer is kept: the code comes first
// in {"error":{"code":...}}.
const maxErrBody = 512

func (rc *recorder) WriteHeader(status int) {
	if rc.status == 0 {
		rc.status = status
	}
	rc.ResponseWriter.WriteHeader(status)
}

func (rc *recorder) Write(b []byte) (int, error) {
	if rc.status == 0 {
		rc.status = http.StatusOK
	}
	if rc.keepError && rc.status >= 400 && len(rc.errBody) < maxErrBody {
		rc.errBody = append(rc.errBody, b[:min(len(b), maxErrBody-len(rc.errBody))]...)
	}
	n, err := rc.ResponseWriter.Write(b)
	rc.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection (flushes,
// deadlines) through the recorder.
func (rc *recorder) Unwrap() http.ResponseWriter { return rc.ResponseWriter }

// errorCode is the code of the error answer kept, or the status number
// when the answer was not one of the API's errors.
func (rc *recorder) errorCode() string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(rc.errBody))
	if dec.Decode(&e) == nil && e.Error.Code != "" {
		return e.Error.Code
	}
	if c, ok := codeField(rc.errBody); ok {
		return c // an answer longer than maxErrBody
	}
	return strconv.Itoa(rc.status)
}

// codeField finds "code":"x" at the start of a truncated error answer.
func codeField(b []byte) (string, bool) {
	const key = `{"error":{"code":"`
	if !bytes.HasPrefix(b, []byte(key)) {
		return "", false
	}
	rest := b[len(key):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return "", false
	}
	return string(rest[:end]), true
}

// nowhere is the ResponseWriter of the route lookup, which answers nothing.
type nowhere struct{}

func (nowhere) Header() http.Header         { return http.Header{} }
func (nowhere) WriteHeader(int)             {}
func (nowhere) Write(b []byte) (int, error) { return len(b), nil }
