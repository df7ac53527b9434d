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
}
