package cli

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"github.com/delayq/delayq/internal/auth"
)

// tokenCmd is `delayq token`: a new random token and the SHA-256 the auth
// file keeps. The server never sees the token written down, only its hash.
type tokenCmd struct {
	Name   string   `arg:"" help:"Name of the auth entry (shown in logs, keys the rate limit)."`
	Scopes []string `short:"s" default:"produce" enum:"produce,consume,read,admin" help:"Scopes: produce, consume, read, admin."`
	Topics []string `short:"t" default:"*" help:"Topic globs the scopes apply to ('*' any run of bytes)."`
}

// Run prints the token (to hand to the client) and the entry to add to
// the auth file.
func (c *tokenCmd) Run(e *env) error {
	var b [32]byte // 256 bits: a single SHA-256 suffices to keep it at rest
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	tok := "dq_" + base64.RawURLEncoding.EncodeToString(b[:])
	entry := auth.Entry{Name: c.Name, SHA256: auth.HashToken(tok), Topics: c.Topics}
	for _, s := range c.Scopes {
		entry.Scopes = append(entry.Scopes, auth.Scope(s))
	}
	fmt.Fprintf(e.stdout, "token (give it to the client; it is not stored anywhere):\n  %s\n\nentry for the auth file's \"tokens\" list:\n", tok)
	return printJSON(e.stdout, entry)
}
