package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/limits"
)

// DefaultMaxRequestBytes is the largest request the API reads: a full batch
// (delayq.MaxBatch jobs) of base64 bodies of maxBody bytes.
func DefaultMaxRequestBytes(maxBody int64) int64 {
	return delayq.MaxBatch * ((maxBody+2)/3*4 + perJobOverhead)
}

// GuardOptions configure Guard. Nil fields check nothing, which is how the
// server runs without tokens or limits.
type GuardOptions struct {
	// Auth holds the tokens. Nil: no tokens, every caller may do
	// everything (the server then refuses to listen beyond loopback unless
	// told to; package server checks that).
	Auth *auth.Store
	// Hosts are the names the Host header may carry. Nil: any.
	Hosts *HostPolicy
	// Rates bounds requests per second per token (per remote address
	// without tokens).
	Rates *limits.Rates
	// Failures bounds unknown tokens (and failed logins, given the
	// handler's Options the same) per remote address: once an address
	// has spent them, its requests that carry a token answer 429 before
	// the token is looked at. Nil: no bound.
	Failures *limits.Rates
	// Bytes bounds the request bytes in flight: each request's body is
	// charged as it arrives, and handlers charge what they decode it into
	// (limits.ChargeFrom).
	Bytes *limits.Bytes
	// Logger receives refused requests at debug level and reloads.
	Logger *slog.Logger
	// Sessions are the dashboard's logins (session.go): a request without
	// a token or a certificate may prove its caller by the session
	// cookie. Nil: no cookie is accepted.
	Sessions *auth.Sessions
}

// Guard wraps the API handler next with the checks that come before any
// route runs, in this order: the Host header (DNS rebinding), the token,
// the token's request rate, the token's scope for the route and its
// topic, and the share of request bytes in flight. Each refusal answers
// the usual {"error":{"code","message"}} with a named code.
func Guard(e *engine.Engine, next http.Handler, o GuardOptions) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	g := &guard{e: e, next: next, o: o, mux: http.NewServeMux()}
	g.routes()
	return g
}

type guard struct {
	e    *engine.Engine
	next http.Handler
	o    GuardOptions
	mux  *http.ServeMux
}

// rule decides whether p may make request r; it returns the request to
// serve (r, or r with a context the engine checks the job's topic
// against: see onJob), or an error that becomes a 403 (or the error's own
// answer).
type rule func(g *guard, r *http.Request, p *auth.Principal) (*http.Request, error)

// guardRules maps each route of routes.go to its operation (a test keeps
// the two lists equal, and every operation in auth's table): what each
// operation needs is auth's to say, for every protocol alike. Routes
// that name a job by id check the scope against that job's own topic
// (onJob), the routes that act on a reservation included: a reservation
// proves that the caller holds the job, not that its token may use the
// job's topic.
var guardRules = []struct {
	pattern string
	op      auth.Op
}{
	{"POST /v1/topics/{topic}/jobs", auth.OpPut},
	{"POST /v1/topics/{topic}/jobs/batch", auth.OpPut},
	{"GET /v1/topics/{topic}/jobs", auth.OpList},
	{"POST /v1/topics/{topic}/kick", auth.OpKick},
	{"GET /v1/topics/{topic}", auth.OpTopic},
	{"GET /v1/topics", auth.OpTopics},
	{"POST /v1/reserve", auth.OpReserve}, // its topics are in its body: onReserve
	{"GET /v1/jobs/{id}", auth.OpGet},
	{"PATCH /v1/jobs/{id}", auth.OpUpdate},
	{"DELETE /v1/jobs/{id}", auth.OpDelete},
	{"POST /v1/jobs/finish", auth.OpFinish}, // each entry checked against its job's topic
	{"POST /v1/jobs/{id}/finish", auth.OpFinish},
	{"POST /v1/jobs/{id}/release", auth.OpRelease},
	{"POST /v1/jobs/{id}/touch", auth.OpTouch},
	{"POST /v1/jobs/{id}/bury", auth.OpBury},
	{"POST /v1/jobs/{id}/kick", auth.OpKickJob},
	{"GET /v1/backup", auth.OpBackup},
	// Topic controls (pause.go).
	{"POST /v1/topics/{topic}/pause", auth.OpPause},
	{"POST /v1/topics/{topic}/resume", auth.OpResume},
	{"DELETE /v1/topics/{topic}/jobs", auth.OpPurge},
	// Topic policies (policy.go).
	{"GET /v1/policies", auth.OpPolicies},
	{"PUT /v1/topics/{topic}/policy", auth.OpSetPolicy},
	{"GET /v1/topics/{topic}/policy", auth.OpGetPolicy},
	{"DELETE /v1/topics/{topic}/policy", auth.OpSetPolicy},
	// The dashboard's charts (charts.go).
	{"GET /v1/topics/{topic}/due", auth.OpCharts},
	{"GET /v1/topics/{topic}/history", auth.OpCharts},
	// Schedules (schedules.go).
	{"GET /v1/schedules", auth.OpSchedules},
	{"GET /v1/schedules/{name}", auth.OpSchedules},
	{"PUT /v1/schedules/{name}", auth.OpSchedule},
	{"DELETE /v1/schedules/{name}", auth.OpSchedule},
	{"POST /v1/schedules/{name}/pause", auth.OpSchedule},
	{"POST /v1/schedules/{name}/resume", auth.OpSchedule},
	// Alarms (alarms.go).
	{"GET /v1/alarms", auth.OpAlarms},
	{"GET /v1/alarms/{name}", auth.OpAlarms},
	{"PUT /v1/alarms/{name}", auth.OpAlarm},
	{"DELETE /v1/alarms/{name}", auth.OpAlarm},
	{"GET /v1/cluster", auth.OpCluster},
	{"GET /metrics", auth.OpStats},
	// The original protocol names its topic inside the body.
	{"POST /{$}", auth.OpCommand},
	{"POST /v1/command", auth.OpCommand},
	{"GET /healthz", auth.OpHealth},
	{"GET /readyz", auth.OpHealth},
	{"GET /v1/openapi.json", auth.OpDescribe},
	{"/ui/", auth.OpDescribe},
	{"GET /{$}", auth.OpDescribe},
	// The dashboard's login (session.go).
	{"GET /v1/session", auth.OpSession},
	{"POST /v1/session", auth.OpLogin},
	{"DELETE /v1/session", auth.OpLogin},
}

// routes registers guardRules on the guard's own mux, each with the
// rule its operation's entry in auth's table makes.
func (g *guard) routes() {
	for _, gr := range guardRules {
		rl := ruleFor(gr.op)
		g.mux.HandleFunc(gr.pattern, func(w http.ResponseWriter, r *http.Request) { g.serve(w, r, rl) })
	}
}

// ruleFor turns op's entry in auth's table into the check of an HTTP
// request: the topic is the route's {topic}, except reserve's, which
// names its topics in its body. nil (open) for an operation open to
// anyone. An operation unknown to the table is refused to everyone
// (TestGuardCoversEveryRoute keeps every route's operation in it).
func ruleFor(op auth.Op) rule {
	n, ok := auth.NeedOf(op)
	switch {
	case !ok:
		return onAll(op) // MayAll is false for an unknown operation
	case op == auth.OpReserve:
		return onReserve
	case n.On == auth.OnAnyone:
		return nil
	case n.On == auth.OnCaller:
		return authenticated
	case n.On == auth.OnTopics:
		return onTopic(op)
	case n.On == auth.OnJobs:
		return onJob(op)
	}
	return onAll(op)
}

func authenticated(_ *guard, r *http.Request, _ *auth.Principal) (*http.Request, error) {
	return r, nil
}

func onTopic(op auth.Op) rule {
	return func(_ *guard, r *http.Request, p *auth.Principal) (*http.Request, error) {
		if t := r.PathValue("topic"); !p.May(op, t) {
			return nil, forbidden("%s", p.Denied(op, t))
		}
		return r, nil
	}
}

func onAll(op auth.Op) rule {
	return func(_ *guard, r *http.Request, p *auth.Principal) (*http.Request, error) {
		if !p.MayAll(op) {
			return nil, forbidden("%s", p.Denied(op, ""))
		}
		return r, nil
	}
}

// onJob lets a call that names jobs by id through when p may run op on
// some topic, and has the engine check the topic of each job the call
// names (engine.WithTopicCheck), in the same step that acts on it.
// Checking here, before the handler, was not enough: a job deleted and
// put again under the same id in another topic between the check and
// the act was acted on unchecked, and the consumer actions were not
// checked at all, their reservation standing in for the scope. A
// principal allowed op on every topic needs no check, so its calls read
// nothing more.
func onJob(op auth.Op) rule {
	return func(_ *guard, r *http.Request, p *auth.Principal) (*http.Request, error) {
		if p.MayAll(op) {
			return r, nil
		}
		if !p.MaySome(op) {
			return nil, forbidden("%s", p.Denied(op, ""))
		}
		return r.WithContext(engine.WithTopicCheck(r.Context(), func(topic string) error {
			if p.May(op, topic) {
				return nil
			}
			return delayq.ErrForbidden
		})), nil
	}
}

// onReserve reads the reserve's small body to learn its topics, and puts
// the bytes back for the API to decode (with the same decoder, so both see
// the same topics).
func onReserve(_ *guard, r *http.Request, p *auth.Principal) (*http.Request, error) {
	if !p.MaySome(auth.OpReserve) {
		return nil, forbidden("%s", p.Denied(auth.OpReserve, ""))
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, smallRequest+1))
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	var req struct {
		Topics []string `json:"topics"`
	}
	if json.Unmarshal(b, &req) != nil {
		return r, nil // the API refuses it as bad_json
	}
	for _, t := range req.Topics {
		if !p.May(auth.OpReserve, t) {
			return nil, forbidden("%s", p.Denied(auth.OpReserve, t))
		}
	}
	return r, nil
}

// statusError is a refusal with its own status and code.
type statusError struct {
	status int
	code   string
	msg    string
}

func (e *statusError) Error() string { return e.msg }

func forbidden(format string, args ...any) error {
	return &statusError{http.StatusForbidden, api.CodeForbidden, "forbidden: " + fmt.Sprintf(format, args...)}
}

// ServeHTTP checks the Host, then hands r to the route's rule by way of
// the guard's own mux (which fills in the path values the rules read).
func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !g.o.Hosts.Allowed(r.Host) {
		g.refuse(w, r, &statusError{http.StatusForbidden, api.CodeHostNotAllowed,
			"the Host " + strconv.Quote(r.Host) + " is not one of this server's names (--allowed-hosts); a page from another site cannot use this API"})
		return
	}
	if _, pattern := g.mux.Handler(r); pattern == "" {
		// No route (the API answers 404 or 405): a valid token is
		// enough to learn that.
		g.serve(w, r, authenticated)
		return
	}
	g.mux.ServeHTTP(w, r)
}

// serve runs one route's checks, then the API.
func (g *guard) serve(w http.ResponseWriter, r *http.Request, rl rule) {
	if rl != nil {
		_, hasBearer := bearer(r)
		if hasBearer {
			if wait, err := g.o.Failures.Check(addrKey(r)); err != nil {
				w.Header().Set("Retry-After", retryAfter(wait))
				g.refuse(w, r, err)
				return
			}
		}
		p, key, bySession := g.who(r)
		if p == nil && hasBearer {
			g.o.Failures.Allow(addrKey(r)) // counts the unknown token
		}
		if p == nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="delayq"`)
			msg := "this call needs a token: send Authorization: Bearer <token>"
			if _, has := bearer(r); has {
				msg = "the token is not valid (unknown, or revoked by a reload)"
			} else if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
				msg = "the session has ended (logged out, expired, or its token was revoked): log in again"
			}
			g.refuse(w, r, &statusError{http.StatusUnauthorized, api.CodeUnauthorized, msg})
			return
		}
		setPrincipal(r, p.Name) // for the audit and access records (observe.go)
		if p != auth.Open {
			// The connection counts against its token's share from now
			// on (--max-conns-per-client); over it, this connection is
			// refused and closed after the answer.
			if err := limits.ConnFrom(r.Context()).Claim(p.Name); err != nil {
				w.Header().Set("Connection", "close")
				w.Header().Set("Retry-After", "1")
				g.refuse(w, r, err)
				return
			}
		}
		// A cookie goes with every request the browser sends, whichever
		// page sends it: a change made with one must say it comes from
		// the dashboard's own origin (SameSite=Strict already keeps the
		// cookie off cross-site requests; this holds where that does not,
		// such as a sibling subdomain or an older browser).
		if bySession && !safeMethod(r.Method) {
			if same, said := fromOwnOrigin(r); !same || !said {
				g.refuse(w, r, forbidden("a change made with the dashboard's session cookie must come from the dashboard's own origin (Sec-Fetch-Site: same-origin, or an Origin of this Host)"))
				return
			}
		}
		r = r.WithContext(auth.WithCaller(r.Context(), auth.Caller{Principal: p, Session: bySession}))
		if wait, err := g.o.Rates.Allow(key); err != nil {
			w.Header().Set("Retry-After", retryAfter(wait))
			g.refuse(w, r, err)
			return
		}
		r2, err := rl(g, r, p)
		if err != nil {
			g.refuse(w, r, err)
			return
		}
		r = r2.WithContext(withPrincipal(r2.Context(), p))
	}
	if g.o.Bytes != nil {
		// The request's charge: opened in front of the whole port when
		// the server runs limits.Answers (which also charges the answer
		// as it is written), else here.
		c := limits.ChargeFrom(r.Context())
		if c == nil {
			c = g.o.Bytes.Open()
			defer c.Close()
			r = r.WithContext(limits.WithCharge(r.Context(), c))
		}
		if r.Body != nil && r.Body != http.NoBody {
			// Charged as the bytes arrive, not by the declared length: a
			// client that declares much and sends little holds only what
			// it sent (limits.Bytes says why). A refusal surfaces from the
			// body's Read or a handler's Take, and the API answers it 503.
			r.Body = c.Body(r.Context(), r.Body)
		}
	}
	g.next.ServeHTTP(w, r)
}

// who authenticates r: by bearer token, else by a verified client
// certificate, else by the dashboard's session cookie (bySession). key
// names the caller for its request rate: the principal, or the remote
// address when the server has no tokens or r none.
func (g *guard) who(r *http.Request) (p *auth.Principal, key string, bySession bool) {
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	if g.o.Auth == nil {
		return auth.Open, "addr:" + host, false
	}
	if tok, has := bearer(r); has {
		p = g.o.Auth.ByToken(tok)
	} else if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		p = g.o.Auth.ByCert(r.TLS.PeerCertificates[0])
	} else if c, err := r.Cookie(SessionCookie); err == nil && g.o.Sessions != nil {
		p, _ = g.o.Sessions.Principal(c.Value)
		bySession = p != nil
	}
	if p == nil {
		return nil, "addr:" + host, false
	}
	return p, "token:" + p.Name, bySession
}

// safeMethod reports whether method only reads.
func safeMethod(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// fromOwnOrigin reads what a browser says about where r comes from: same
// when the server's own origin sent it, said when the browser said
// anything (Sec-Fetch-Site, else Origin). Clients other than browsers
// say nothing.
func fromOwnOrigin(r *http.Request) (same, said bool) {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" {
		return s == "same-origin", true
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host), true
	}
	return false, false
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false
	}
	scheme, tok, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", true
	}
	return strings.TrimSpace(tok), true
}

// refuse answers a refusal and logs it at debug level (a flood of them
// must not flood the log).
func (g *guard) refuse(w http.ResponseWriter, r *http.Request, err error) {
	status, code := 0, ""
	var se *statusError
	if errors.As(err, &se) {
		status, code = se.status, se.code
	} else {
		code, status = api.CodeOf(err)
	}
	msg := strings.TrimPrefix(err.Error(), "delayq: ")
	if status >= 500 && code == api.CodeInternal {
		g.o.Logger.Error("http guard failed", "method", r.Method, "path", r.URL.Path, "err", err)
		msg = "internal error; see the server log"
	}
	g.o.Logger.Debug("http request refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "code", code)
	writeJSON(w, status, api.ErrorResponse{Error: api.ErrorBody{Code: code, Message: msg}})
}

// HostPolicy is the set of names the Host header may carry. IP literals,
// "localhost" and names under ".localhost" are always allowed: a
// DNS-rebinding page runs under the attacker's own domain name, so its
// requests carry that name, never an address or a loopback name.
type HostPolicy struct {
	any      bool
	names    map[string]bool
	suffixes []string
}

// NewHostPolicy allows names: "*" allows any Host, ".example.com" any name
// under example.com, other entries exactly that name (case-insensitive;
// ports are ignored).
func NewHostPolicy(names []string) *HostPolicy {
	p := &HostPolicy{names: make(map[string]bool)}
	for _, n := range names {
		n = strings.ToLower(strings.TrimSpace(n))
		switch {
		case n == "":
		case n == "*":
			p.any = true
		case strings.HasPrefix(n, "."):
			p.suffixes = append(p.suffixes, n)
		default:
			p.names[strings.TrimSuffix(stripPort(n), ".")] = true
		}
	}
	return p
}

// Allowed reports whether a request's Host may be served. A nil policy
// allows every Host; an empty Host (HTTP/1.0) is allowed, since browsers
// always send one.
func (p *HostPolicy) Allowed(host string) bool {
	if p == nil || p.any || host == "" {
		return true
	}
	h := strings.TrimSuffix(strings.ToLower(stripPort(host)), ".")
	if net.ParseIP(h) != nil || h == "localhost" || strings.HasSuffix(h, ".localhost") || p.names[h] {
		return true
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(h, s) {
			return true
		}
	}
	return false
}

// stripPort removes a port, and the brackets of an IPv6 literal.
func stripPort(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}
