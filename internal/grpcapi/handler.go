package grpcapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/delayq/delayq"
	delayqv1 "github.com/delayq/delayq/api/gen/delayq/v1"
	"github.com/delayq/delayq/api/gen/delayq/v1/delayqv1connect"
	"github.com/delayq/delayq/internal/audit"
	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/limits"
)

// Options configure the handler. Nil fields check nothing, as the HTTP
// API's GuardOptions: that is how the server runs without tokens or
// limits.
type Options struct {
	// Logger receives the audit records (always), the access log (with
	// AccessLog) and internal errors. Default slog.Default().
	Logger *slog.Logger
	// AccessLog logs one record per call (--access-log).
	AccessLog bool
	// Auth holds the tokens. Nil: every caller may do everything.
	Auth *auth.Store
	// Hosts reports whether a request's Host header is one of the
	// server's names (DNS rebinding). Nil: any.
	Hosts func(host string) bool
	// Rates bounds calls per second per token (per remote address
	// without tokens), shared with the HTTP API.
	Rates *limits.Rates
	// Failures bounds unknown tokens per remote address, shared with the
	// HTTP API: once an address has spent them, its calls that carry a
	// token are refused before the token is looked at.
	Failures *limits.Rates
	// Bytes bounds the request bytes in flight, shared with the HTTP API:
	// each call's body is charged as it arrives, and a put's decoded
	// bodies as the HTTP API charges them (limits.PutCost).
	Bytes *limits.Bytes
}

// Request size bounds, per call, on the bytes as sent (the envelope
// included); a larger request is refused as RESOURCE_EXHAUSTED
// request_too_large. No message may pass the batch bound either
// (connect.WithReadMaxBytes).
const (
	// perJobOverhead is room for one job's fields besides its body.
	perJobOverhead = 4 << 10
	// smallRequest bounds the calls that carry no job body: a reserve
	// naming 1,000 topics of 200 bytes fits, as does a batch finish of
	// 1,000 entries.
	smallRequest = 1 << 20
)

// handler serves DelayQService: the checks before a call (ServeHTTP),
// then connect's handler, whose interceptor checks the scope and maps
// errors (intercept).
type handler struct {
	e       *engine.Engine
	o       Options
	log     *slog.Logger
	connect http.Handler
	std     http.Handler // the standard services (standard.go)
	errw    *connect.ErrorWriter
	// maxBytes bounds each procedure's request in binary protobuf, and
	// maxJSON in JSON, where a body is base64 text (4 bytes for every 3):
	// a put of a body at --max-body fits both. Unknown paths get
	// smallRequest (connect answers them 404 without reading).
	maxBytes, maxJSON map[string]int64
}

// base64Len is the length of n bytes in base64 (JSON's bytes fields).
func base64Len(n int64) int64 { return 4 * ((n + 2) / 3) }

// New returns the path prefix DelayQService is served under
// ("/delayq.v1.DelayQService/") and its handler over e.
func New(e *engine.Engine, o Options) (string, http.Handler) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	maxBody := int64(e.Config().MaxBody)
	limits := func(body int64) map[string]int64 {
		return map[string]int64{
			delayqv1connect.DelayQServicePutBatchProcedure: delayq.MaxBatch * (body + perJobOverhead),
			delayqv1connect.DelayQServicePutProcedure:      body + perJobOverhead,
			delayqv1connect.DelayQServiceUpdateProcedure:   body + perJobOverhead,
		}
	}
	h := &handler{e: e, o: o, log: o.Logger, errw: connect.NewErrorWriter(),
		maxBytes: limits(maxBody), maxJSON: limits(base64Len(maxBody))}
	path, ch := delayqv1connect.NewDelayQServiceHandler(&service{e: e},
		connect.WithInterceptors(connect.UnaryInterceptorFunc(h.intercept)),
		// The largest request of any encoding; boundedBody holds each
		// call to its own procedure's bound.
		connect.WithReadMaxBytes(int(h.maxJSON[delayqv1connect.DelayQServicePutBatchProcedure])),
		connect.WithCodec(strictJSON{}),
		connect.WithCodec(strictJSONCharset{}),
		// No gzip: a compressed request would decode to many times the
		// bytes the budget charged as they arrived (a few KiB of zeros
		// to a batch's worth), and the HTTP API takes no compressed
		// bodies either. A client that sends one is told UNIMPLEMENTED.
		connect.WithCompression("gzip", nil, nil),
	)
	h.connect = ch
	h.std = newStandard(e)
	return path, h
}

// callInfo is what the handler learns about one call while it runs.
type callInfo struct {
	actor     audit.Actor
	principal *auth.Principal
	status    string // the status code answered, once known ("ok", "not_found", ...)
	code      string // the delayq code of an error answered
	extra     []slog.Attr
}

type infoKey struct{}

func infoOf(ctx context.Context) *callInfo {
	in, _ := ctx.Value(infoKey{}).(*callInfo)
	return in
}

// principalOf is the caller the checks found, or nil.
func principalOf(ctx context.Context) *auth.Principal {
	if in := infoOf(ctx); in != nil {
		return in.principal
	}
	return nil
}

// noteAudit adds an attribute to the call's audit record (a topic kick's
// count).
func noteAudit(ctx context.Context, key string, v int) {
	if in := infoOf(ctx); in != nil {
		in.extra = append(in.extra, slog.Int(key, v))
	}
}

// ServeHTTP runs the checks that need no message, in the HTTP API's order
// (Host, token or certificate, request rate, then the bytes in flight and
// the request's size as it is read), then connect's handler; and records
// the call's duration and, with AccessLog, its access record.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	in := &callInfo{actor: audit.Actor{Protocol: "grpc", Remote: r.RemoteAddr}}
	ctx := context.WithValue(r.Context(), infoKey{}, in)
	ctx = audit.WithActor(ctx, &in.actor)
	r = r.WithContext(ctx)
	procedure := r.URL.Path
	stdOp, std := standard[procedure]
	if _, ok := ops[procedure]; !ok && !std {
		procedure = "unmatched"
	}
	serve := h.connect
	if isStandard(r.URL.Path) {
		serve = h.std
	}
	rec := &recorder{ResponseWriter: w}
	defer func() { h.observe(r, procedure, in, rec, time.Since(start)) }()

	if !h.errw.IsSupported(r) {
		// Not a gRPC, gRPC-Web or Connect request (a browser's GET):
		// connect refuses it without reading it or calling a method.
		serve.ServeHTTP(rec, r)
		return
	}
	if h.o.Hosts != nil && !h.o.Hosts(r.Host) {
		h.refuse(rec, r, in, &refusal{delayq.CodeHostNotAllowed,
			"the Host " + strconv.Quote(r.Host) + " is not one of this server's names (--allowed-hosts); a page from another site cannot use this API"})
		return
	}
	hasToken := h.o.Auth != nil && r.Header.Get("Authorization") != ""
	failKey := "addr:" + limits.ClientKey(peerAddr(r.RemoteAddr))
	if hasToken {
		if _, err := h.o.Failures.Check(failKey); err != nil {
			h.refuse(rec, r, in, err)
			return
		}
	}
	p, key := h.who(r)
	if p == nil && hasToken {
		h.o.Failures.Allow(failKey) // counts the unknown token
	}
	anonymous := false
	if p == nil && std && !hasToken && r.Header.Get("Authorization") == "" && (*auth.Principal)(nil).MayAll(stdOp) {
		// A probe or a reflection client without a token: allowed what
		// anyone may do (standard.go), rate-limited by its address.
		anonymous, key = true, failKey
	}
	if p == nil && !anonymous {
		msg := "this call needs a token: send the metadata authorization: Bearer <token>"
		if r.Header.Get("Authorization") != "" {
			msg = "the token is not valid (unknown, or revoked by a reload)"
		}
		h.refuse(rec, r, in, &refusal{delayq.CodeUnauthorized, msg})
		return
	}
	in.principal, in.actor.Principal = p, "anonymous"
	if p != nil {
		in.actor.Principal = p.Name
	}
	if std && !p.MayAll(stdOp) {
		h.refuse(rec, r, in, forbidden(p.Denied(stdOp, "")))
		return
	}
	if p != nil && p != auth.Open {
		// The connection counts against its token's share from now on
		// (--max-conns-per-client), as on the HTTP API.
		if err := limits.ConnFrom(ctx).Claim(p.Name); err != nil {
			h.refuse(rec, r, in, err)
			return
		}
	}
	if wait, err := h.o.Rates.Allow(key); err != nil {
		h.refuse(rec, r, in, retryAfter(err, wait))
		return
	}
	if enc := compressed(r); enc != "" {
		h.refuse(rec, r, in, connect.NewError(connect.CodeUnimplemented, errors.New("the request is compressed ("+strconv.Quote(enc)+
			"); send it uncompressed: compressed requests are not accepted, since one would decode to many times the bytes charged to the budget as it arrived")))
		return
	}
	if h.o.Bytes != nil {
		// Charged as the bytes arrive, as the HTTP API charges them; a
		// refusal surfaces from the body's Read (as its status) or a
		// put's Take.
		c := limits.ChargeFrom(ctx) // opened by limits.Answers in front of the port
		if c == nil {
			c = h.o.Bytes.Open()
			defer c.Close()
			ctx = limits.WithCharge(ctx, c)
			r = r.WithContext(ctx)
		}
		r.Body = c.Body(ctx, r.Body)
	}
	bounds := h.maxBytes
	if isJSON(r) {
		bounds = h.maxJSON
	}
	max, ok := bounds[r.URL.Path]
	if !ok {
		max = smallRequest
	}
	r.Body = &boundedBody{r: r.Body, left: max, max: max}
	serve.ServeHTTP(rec, r)
}

// isJSON says whether r's messages are JSON (Connect, gRPC or gRPC-Web
// with the json codec) rather than binary protobuf.
func isJSON(r *http.Request) bool {
	return strings.Contains(strings.ToLower(r.Header.Get("Content-Type")), "json")
}

// compressed names the compression r's messages are sent with, in any
// of the three protocols' headers, or "" for none. Connect would refuse
// it too, but with "supported encodings are " and an empty list.
func compressed(r *http.Request) string {
	for _, h := range []string{"Content-Encoding", "Connect-Content-Encoding", "Grpc-Encoding"} {
		if v := strings.TrimSpace(r.Header.Get(h)); v != "" && !strings.EqualFold(v, "identity") {
			return v
		}
	}
	return ""
}

// retryAfter is a rate limit's refusal carrying how long to wait, as
// gRPC clients read it: a google.rpc.RetryInfo detail and a retry-after
// header (whole seconds, rounded up, as HTTP's Retry-After).
func retryAfter(err error, wait time.Duration) error {
	ce := toConnect(context.Background(), slog.New(slog.DiscardHandler), "", err)
	if d, derr := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}); derr == nil {
		ce.AddDetail(d)
	}
	ce.Meta().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
	return ce
}

// who authenticates r: by bearer token, else by a verified client
// certificate. key names the caller for its request rate: the principal,
// or the remote address when the server has no tokens.
func (h *handler) who(r *http.Request) (p *auth.Principal, key string) {
	if h.o.Auth == nil {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		return auth.Open, "addr:" + host
	}
	if a := r.Header.Get("Authorization"); a != "" {
		scheme, tok, _ := strings.Cut(a, " ")
		if strings.EqualFold(scheme, "Bearer") {
			p = h.o.Auth.ByToken(strings.TrimSpace(tok))
		}
	} else if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		p = h.o.Auth.ByCert(r.TLS.PeerCertificates[0])
	}
	if p == nil {
		return nil, ""
	}
	return p, "token:" + p.Name
}

// refuse answers a refusal of the checks before a call, in the protocol
// the client speaks, and logs it at debug level (a flood of them must not
// flood the log).
func (h *handler) refuse(w http.ResponseWriter, r *http.Request, in *callInfo, err error) {
	ce := toConnect(r.Context(), h.log, r.URL.Path, err)
	in.status, in.code = ce.Code().String(), codeIn(ce)
	h.log.Debug("grpc call refused", "procedure", r.URL.Path, "remote", r.RemoteAddr, "code", in.code)
	_ = h.errw.Write(w, r, ce)
}

// codeIn is the delayq code in ce's ErrorInfo detail, or "".
func codeIn(ce *connect.Error) string {
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if info, ok := v.(*delayqv1.ErrorInfo); ok {
				return info.Code
			}
		}
	}
	return ""
}

// intercept runs around every method, once its request is decoded: the
// scope check of allow (which needs the request's topic), the call, the
// audit record of the calls that change something outside the job hot
// path, and the mapping of the call's error to its status.
func (h *handler) intercept(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		procedure := req.Spec().Procedure
		p := principalOf(ctx)
		if p == nil {
			p = auth.Open // served without ServeHTTP's checks: nothing checks tokens
		}
		var resp connect.AnyResponse
		cctx, err := allow(ctx, p, ops[procedure], req.Any())
		if err == nil {
			resp, err = next(cctx, req)
		}
		if a, ok := audits[procedure]; ok {
			outcome := audit.OK
			if err != nil {
				outcome, _, _ = codeOf(err)
			}
			in := infoOf(ctx)
			var extra []slog.Attr
			if in != nil {
				extra = in.extra
			}
			audit.Log(ctx, h.log, audit.ActorOf(ctx), a.action, a.target(req.Any()), outcome, extra...)
		}
		if err != nil {
			ce := toConnect(ctx, h.log, procedure, err)
			if in := infoOf(ctx); in != nil {
				in.status, in.code = ce.Code().String(), codeIn(ce)
			}
			return nil, ce
		}
		if in := infoOf(ctx); in != nil {
			in.status = "ok"
		}
		return resp, nil
	}
}

// audits are the methods that change something outside the job hot path,
// with the action each records: the HTTP API's actions for the same
// changes (docs/operations.md).
var audits = map[string]struct {
	action string
	target func(msg any) string
}{
	delayqv1connect.DelayQServiceDeleteProcedure:    {"job.delete", jobTarget},
	delayqv1connect.DelayQServiceUpdateProcedure:    {"job.update", jobTarget},
	delayqv1connect.DelayQServiceKickProcedure:      {"job.kick", jobTarget},
	delayqv1connect.DelayQServiceKickTopicProcedure: {"topic.kick", func(msg any) string { return "topic:" + msg.(interface{ GetTopic() string }).GetTopic() }},
}

func jobTarget(msg any) string { return "job:" + msg.(interface{ GetId() string }).GetId() }

// observe records a finished call: the duration histogram by procedure
// and status, and the access record.
func (h *handler) observe(r *http.Request, procedure string, in *callInfo, rec *recorder, d time.Duration) {
	status := in.status
	if status == "" {
		status = rec.statusCode()
	}
	h.e.Metrics().GRPCRequest(procedure, status, d)
	if !h.o.AccessLog {
		return
	}
	lr := slog.NewRecord(time.Now(), slog.LevelInfo, "grpc request", 0)
	lr.AddAttrs(slog.Bool("access", true), slog.String("procedure", procedure), slog.String("protocol", protocolOf(r)),
		slog.String("status", status), slog.String("code", in.code), slog.Int64("bytes", rec.bytes), slog.Duration("duration", d),
		slog.String("principal", in.actor.Principal), slog.String("remote", in.actor.Remote))
	_ = h.log.Handler().Handle(r.Context(), lr)
}

// protocolOf names the protocol of r by its Content-Type.
func protocolOf(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "application/grpc-web"):
		return "grpcweb"
	case strings.HasPrefix(ct, "application/grpc"):
		return "grpc"
	}
	return "connect"
}

// recorder notes an answer's size and HTTP status, for a call connect
// answered itself (an undecodable request, a wrong Content-Type) before
// any method ran.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

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
	n, err := rc.ResponseWriter.Write(b)
	rc.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection (flushes,
// trailers) through the recorder.
func (rc *recorder) Unwrap() http.ResponseWriter { return rc.ResponseWriter }

// Flush passes flushes on: connect flushes gRPC answers.
func (rc *recorder) Flush() {
	if f, ok := rc.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// statusCode is the status of an answer no method gave: gRPC's in the
// Grpc-Status trailer (or header), else one named by the HTTP status.
func (rc *recorder) statusCode() string {
	hdr := rc.Header()
	s := hdr.Get("Grpc-Status")
	if s == "" {
		s = hdr.Get(http.TrailerPrefix + "Grpc-Status")
	}
	if n, err := strconv.Atoi(s); err == nil && n >= 0 && n <= 16 {
		if n == 0 {
			return "ok"
		}
		return connect.Code(n).String()
	}
	switch {
	case rc.status == 0 || rc.status == http.StatusOK:
		return "ok"
	case rc.status == http.StatusNotFound:
		return connect.CodeUnimplemented.String()
	}
	return "http_" + strconv.Itoa(rc.status) // bounded: a handful of statuses connect answers
}

// boundedBody refuses a request body longer than max bytes with
// RESOURCE_EXHAUSTED request_too_large, and names a refusal of the bytes
// in flight by its status: connect answers a *connect.Error from a body's
// Read as it is, and any other read error as a protocol error.
type boundedBody struct {
	r         io.ReadCloser
	left, max int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly max from a longer one.
		var one [1]byte
		if n, _ := b.r.Read(one[:]); n == 0 {
			return 0, io.EOF
		}
		return 0, withInfo(connect.CodeResourceExhausted, &delayqv1.ErrorInfo{Code: delayq.CodeRequestTooLarge,
			Message: "request body is over the limit of " + strconv.FormatInt(b.max, 10) + " bytes"})
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	var le *delayq.LimitError
	if errors.As(err, &le) {
		return n, withInfo(connect.CodeResourceExhausted, &delayqv1.ErrorInfo{Code: le.Code, Message: delayq.Message(le)})
	}
	return n, err
}

func (b *boundedBody) Close() error { return b.r.Close() }

// peerAddr parses a request's RemoteAddr for limits.ClientKey.
func peerAddr(remote string) net.Addr {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return net.TCPAddrFromAddrPort(ap)
	}
	return &net.UnixAddr{Name: remote}
}
