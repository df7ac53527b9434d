// Package redact masks the secrets a setting, a log value or an error
// message may carry, in one place, so every output (serve --check, the
// start error, the logs) hides the same things the same way:
//
//   - the password of a URL's userinfo (redis://alice:pw@host keeps alice;
//     a userinfo without a colon, such as a token used as the user name,
//     is masked whole);
//   - the value of a key=value pair whose key names a secret
//     (?password=..., a libpq DSN's password='...', access_token=...).
//
// It works on the text, not on a parsed URL: a password holding '%',
// '#', '/', '@' or a space makes the URL unparseable (or parse into a
// different host), and such a URL is exactly the one a failing start
// prints. Where the text is ambiguous it masks more, never less: the
// userinfo of a URL runs to the last '@' of its line.
package redact

import (
	"regexp"
	"strings"
)

// Mask stands for a secret in the output.
const Mask = "xxxxx"

// secretPair matches key=value where the key names a secret. The value
// is a quoted string (libpq DSN, with backslash escapes; an unterminated
// quote runs to the end) or runs to white space or '&'.
var secretPair = regexp.MustCompile(`(?i)([A-Za-z0-9_.-]*(?:pass|pwd|secret|token|credential|api[_-]?key)[A-Za-z0-9_.-]*)=('(?:[^'\\]|\\.)*(?:'|\\?$)|"(?:[^"\\]|\\.)*(?:"|\\?$)|[^\s&]*)`)

// String returns s with every secret it holds masked (package doc).
func String(s string) string {
	if !strings.Contains(s, "://") && !strings.Contains(s, "=") {
		return s // the common case: nothing to look at
	}
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		lines[i] = userinfo(l)
	}
	s = strings.Join(lines, "")
	return secretPair.ReplaceAllStringFunc(s, func(m string) string {
		k, v, _ := strings.Cut(m, "=")
		if v == "" || v == Mask || v == "'"+Mask+"'" || v == `"`+Mask+`"` {
			return m
		}
		return k + "=" + Mask
	})
}

// userinfo masks the userinfo passwords of the URLs in one line.
func userinfo(line string) string {
	var b strings.Builder
	for {
		i := strings.Index(line, "://")
		if i < 0 {
			break
		}
		rest := line[i+3:]
		at := strings.LastIndexByte(rest, '@')
		if at < 0 {
			break
		}
		info := rest[:at]
		user, _, hasPass := strings.Cut(info, ":")
		switch {
		case hasPass:
			// user:password; the user name is not a secret.
			b.WriteString(line[:i+3] + user + ":" + Mask)
		case strings.ContainsAny(info, "/?#"):
			// No colon and a path: an '@' further on, not a userinfo.
			b.WriteString(line[:i+3] + info)
		case info == "" || info == Mask:
			b.WriteString(line[:i+3] + info)
		default:
			// A user name alone is often a token (https://TOKEN@host).
			b.WriteString(line[:i+3] + Mask)
		}
		line = rest[at:] // from the '@' on; a later URL is masked in turn
		b.WriteString(line[:1])
		line = line[1:]
	}
	b.WriteString(line)
	return b.String()
}

// Error returns err with its message masked (String), still matching
// what err matches (errors.Is, errors.As): for an error that may quote a
// setting, such as a store's refusal of its URL.
func Error(err error) error {
	if err == nil {
		return nil
	}
	return &masked{err}
}

type masked struct{ err error }

func (m *masked) Error() string { return String(m.err.Error()) }
func (m *masked) Unwrap() error { return m.err }
