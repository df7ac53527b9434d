package auth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// File is the auth file's format (JSON, so it needs no extra parser and
// every tool can write it):
//
//	{"tokens": [
//	  {"name": "shop", "sha256": "<hex of the token's SHA-256>",
//	   "scopes": ["produce"], "topics": ["order*"]},
//	  {"name": "worker-1", "client_names": ["worker-1.internal"],
//	   "scopes": ["consume"], "topics": ["order*"]},
//	  {"name": "ops", "sha256": "...", "scopes": ["admin"]}
//	]}
type File struct {
	Tokens []Entry `json:"tokens"`
}

// Entry is one principal: a token (by hash), client certificate names, or
// both, with its scopes and topic globs (default: every topic).
type Entry struct {
	// Name names the entry in logs and rate limits; unique.
	Name string `json:"name"`
	// SHA256 is the hex SHA-256 of the token (HashToken); the token itself
	// is never written down on the server.
	SHA256 string `json:"sha256,omitempty"`
	// ClientNames are certificate common names or DNS names that
	// authenticate as this entry over mutual TLS.
	ClientNames []string `json:"client_names,omitempty"`
	// Scopes are produce, consume, read and admin.
	Scopes []Scope `json:"scopes"`
	// Topics are globs ('*' any run, '?' one byte). Default ["*"].
	Topics []string `json:"topics,omitempty"`
}

// maxFile bounds the auth file; thousands of entries fit in it.
const maxFile = 4 << 20

// Parse reads and checks an auth file, reporting every bad entry at once.
// Unknown fields are refused, so a misspelt "topic" does not silently
// grant every topic.
func Parse(b []byte) (*File, error) {
	if len(b) > maxFile {
		return nil, fmt.Errorf("auth file is over %d bytes", maxFile)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a valid auth file: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("not a valid auth file: more than one JSON value")
	}
	var errs []error
	names := make(map[string]bool)
	for i, e := range f.Tokens {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("tokens[%d] (%q): "+format, append([]any{i, e.Name}, args...)...))
		}
		if e.Name == "" {
			bad("no name")
		} else if names[e.Name] {
			bad("name used twice")
		}
		names[e.Name] = true
		if e.SHA256 == "" && len(e.ClientNames) == 0 {
			bad("neither sha256 nor client_names: nothing can authenticate as it")
		}
		if e.SHA256 != "" && !isHexHash(e.SHA256) {
			bad("sha256 must be 64 hex digits (the hash, never the token; `delayq token` prints both)")
		}
		for _, n := range e.ClientNames {
			if strings.TrimSpace(n) == "" {
				bad("empty client name")
			}
		}
		if len(e.Scopes) == 0 {
			bad("no scopes (produce, consume, read, admin)")
		}
		for _, s := range e.Scopes {
			if !validScope(s) {
				bad("unknown scope %q (produce, consume, read, admin)", s)
			}
		}
		for _, g := range e.Topics {
			if g == "" || len(g) > 200 {
				bad("topic glob %q must be 1 to 200 bytes", g)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &f, nil
}

func isHexHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
