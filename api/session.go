package api

// LoginRequest is the body of POST /v1/session: the dashboard's login.
type LoginRequest struct {
	Token string `json:"token"`
}

// Session answers GET and POST /v1/session: who the caller is. Auth is
// false on a server without tokens (everyone may do everything, and the
// dashboard needs no login); Expires is when a login by session cookie
// ends, absent for a token or a certificate.
type Session struct {
	Auth    bool     `json:"auth"`
	Name    string   `json:"name"`
	Scopes  []string `json:"scopes"`
	Topics  []string `json:"topics"`
	Expires *Time    `json:"expires,omitempty"`
	// Needs says, for each route ("METHOD /path" as the server registers
	// it), what it asks of its caller: the server's one scope table, so
	// the dashboard can disable what this caller may not do, with the
	// reason, instead of learning it from a forbidden answer.
	Needs map[string]RouteNeed `json:"needs,omitempty"`
}

// RouteNeed is what one route asks of its caller (Session.Needs): every
// one of Scopes, checked On "anyone" (no check), "caller" (any valid
// token), "topics" (the topic the route names), "jobs" (the topic of the
// job it names) or "every" (every topic, "*").
type RouteNeed struct {
	Scopes []string `json:"scopes"`
	On     string   `json:"on"`
}
