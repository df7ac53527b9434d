package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/config"
	"github.com/delayq/delayq/internal/server"
	"github.com/delayq/delayq/internal/tlsconf/tlstest"
)

// delayq token prints a token and an entry whose hash is the token's, in a
// form the auth file accepts.
func TestTokenCommand(t *testing.T) {
	t.Parallel()
	code, out, errOut := run(t, "token", "shop", "-s", "produce", "-s", "read", "-t", "order*")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(out, "\n")
	tok := strings.TrimSpace(lines[1])
	if !strings.HasPrefix(tok, "dq_") || len(tok) < 40 {
		t.Fatalf("token line %q", tok)
	}
	entry := out[strings.Index(out, "{"):]
	if strings.Contains(entry, tok) {
		t.Fatal("the entry holds the token itself")
	}
	var e auth.Entry
	if err := json.Unmarshal([]byte(entry), &e); err != nil {
		t.Fatal(err)
	}
	file, _ := json.Marshal(auth.File{Tokens: []auth.Entry{e}})
	s, err := auth.Load("", string(file))
	if err != nil {
		t.Fatal(err)
	}
	if p := s.ByToken(tok); p == nil || !p.Allows(auth.Read, "orders") || p.Allows(auth.Produce, "mail") {
		t.Fatalf("the printed entry does not grant what was asked: %+v", p)
	}
}

// The client commands reach an https:// server with --ca-file and --token.
func TestTLSAndToken(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	cert, key := ca.Issue(t, "server", "localhost")
	cfg := config.Default()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.BeanstalkAddr = ""
	cfg.DataDir = t.TempDir()
	cfg.TLSCert, cfg.TLSKey = cert, key
	cfg.Auth = `{"tokens":[{"name":"ops","sha256":"` + auth.HashToken("ops-token") + `","scopes":["admin"]}]}`
	s := server.New(cfg, nil)
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	url := strings.Replace(s.URL(), "127.0.0.1", "localhost", 1)

	out := mustRun(t, "put", "--server", url, "--ca-file", ca.File, "--token", "ops-token", "orders", "hello")
	if out == "" {
		t.Fatalf("put printed %q", out)
	}
	if code, _, errOut := run(t, "put", "--server", url, "--ca-file", ca.File, "orders", "hello"); code == 0 || !strings.Contains(errOut, "needs a token") {
		t.Fatalf("put without a token: exit %d, %q", code, errOut)
	}
	if code, _, errOut := run(t, "put", "--server", url, "--token", "ops-token", "orders", "hello"); code == 0 || !strings.Contains(errOut, "certificate") {
		t.Fatalf("put without the CA: exit %d, %q", code, errOut)
	}
}
