package httpapi

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/limits"
)

// SessionCookie names the dashboard's session cookie. It holds only a
// random session id (auth.Sessions); the token never reaches the browser's
// storage.
const SessionCookie = "delayq_session"

// sessionRoutes registers the dashboard's login: POST logs in with a
// token, GET says who the caller is, DELETE logs out.
func (h *handler) sessionRoutes() {
	m := h.mux
	m.HandleFunc("GET /v1/session", h.getSession)
	m.HandleFunc("POST /v1/session", h.login)
	m.HandleFunc("DELETE /v1/session", h.logout)
}

// getSession: GET /v1/session → who the guard found the caller to be.
func (h *handler) getSession(w http.ResponseWriter, r *http.Request) {
	c, ok := auth.CallerOf(r.Context())
	if !ok { // no guard in front: nobody checks tokens
		c = auth.Caller{Principal: auth.Open}
	}
	s := toSession(c.Principal)
	if c.Session {
		if ck, err := r.Cookie(SessionCookie); err == nil {
			if _, exp := h.opts.Sessions.Principal(ck.Value); !exp.IsZero() {
				s.Expires = &api.Time{Time: exp}
			}
		}
	}
	writeJSON(w, http.StatusOK, s)
}

func toSession(p *auth.Principal) api.Session {
	s := api.Session{Auth: p != auth.Open, Name: p.Name, Scopes: []string{}, Topics: p.Topics(), Needs: routeNeeds()}
	for _, sc := range p.Scopes() {
		s.Scopes = append(s.Scopes, string(sc))
	}
	return s
}

// login: POST /v1/session {"token"} → 200 the session, with an HttpOnly,
// SameSite=Strict cookie naming it; 401 for a token not in force. A page
// of another site cannot log the operator's browser in (as someone else).
func (h *handler) login(w http.ResponseWriter, r *http.Request) {
	if same, said := fromOwnOrigin(r); said && !same {
		h.writeError(w, r, &httpError{http.StatusForbidden, api.CodeForbidden, "forbidden: a login must come from the dashboard's own origin"})
		return
	}
	if h.opts.Sessions == nil {
		h.writeError(w, r, &httpError{http.StatusNotFound, api.CodeNotFound, "this server runs without tokens: there is nothing to log in to"})
		return
	}
	// An address that has sent too many wrong tokens is refused before
	// its token is looked at, so guessing runs at --max-auth-failures a
	// minute whatever the guesses.
	addr := addrKey(r)
	if wait, err := h.opts.Failures.Check(addr); err != nil {
		h.refuseRate(w, r, wait, err)
		return
	}
	var req api.LoginRequest
	if err := decode(w, r, smallRequest, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	p := h.opts.Sessions.Verify(req.Token)
	if p == nil {
		h.opts.Failures.Allow(addr) // counts the failure
		h.writeError(w, r, &httpError{http.StatusUnauthorized, api.CodeUnauthorized, "the token is not valid (unknown, or revoked by a reload)"})
		return
	}
	// A login is a request of its token like any other (--rate-limit):
	// its sessions cost memory, and each ends the token's oldest once it
	// holds its bound (--max-dashboard-sessions).
	if wait, err := h.opts.Rates.Allow("token:" + p.Name); err != nil {
		h.refuseRate(w, r, wait, err)
		return
	}
	id, p, exp := h.opts.Sessions.Login(req.Token)
	if p == nil { // revoked by a reload since Verify
		h.writeError(w, r, &httpError{http.StatusUnauthorized, api.CodeUnauthorized, "the token is not valid (unknown, or revoked by a reload)"})
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: id, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
		// No Expires: the cookie ends with the browser; the server ends
		// the session after auth.SessionTTL whatever the browser keeps.
	})
	s := toSession(p)
	s.Expires = &api.Time{Time: exp}
	writeJSON(w, http.StatusOK, s)
}

// logout: DELETE /v1/session → 204; the session ends on the server and
// the cookie is cleared. Without a session it only clears the cookie.
func (h *handler) logout(w http.ResponseWriter, r *http.Request) {
	if same, said := fromOwnOrigin(r); said && !same {
		h.writeError(w, r, &httpError{http.StatusForbidden, api.CodeForbidden, "forbidden: a logout must come from the dashboard's own origin"})
		return
	}
	if ck, err := r.Cookie(SessionCookie); err == nil {
		h.opts.Sessions.Logout(ck.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	w.WriteHeader(http.StatusNoContent)
}

// refuseRate answers a rate refusal (429) with its Retry-After in whole
// seconds, rounded up.
func (h *handler) refuseRate(w http.ResponseWriter, r *http.Request, wait time.Duration, err error) {
	w.Header().Set("Retry-After", retryAfter(wait))
	h.writeError(w, r, err)
}

// retryAfter is a Retry-After header's value for wait: whole seconds,
// rounded up, at least 1.
func retryAfter(wait time.Duration) string {
	return strconv.Itoa(max(1, int((wait+time.Second-1)/time.Second)))
}

// addrKey names r's client for the per-address bounds: its remote
// address, as limits.ClientKey names it (an IPv6 client by its /64).
func addrKey(r *http.Request) string {
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return "addr:" + limits.ClientKey(net.TCPAddrFromAddrPort(ap))
	}
	return "addr:" + r.RemoteAddr
}
