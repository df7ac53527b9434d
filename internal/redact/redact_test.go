package redact

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"127.0.0.1:7480", "127.0.0.1:7480"},
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://:pw@h:1", "redis://:xxxxx@h:1"},
		{"redis://alice:TopSecretPw@h:1/0", "redis://alice:xxxxx@h:1/0"},
		// Unparseable as URLs: each of these leaked before.
		{"redis://:p%w@h:1", "redis://:xxxxx@h:1"},
		{"redis://:p#w@h:1", "redis://:xxxxx@h:1"},
		{"redis://:p/w@h:1", "redis://:xxxxx@h:1"},
		{"redis://:p w@h:1", "redis://:xxxxx@h:1"},
		{"redis://:p@w@h:1", "redis://:xxxxx@h:1"},
		{"https://ghp_token@example.com/x", "https://xxxxx@example.com/x"},
		{"https://example.com/a@b", "https://example.com/a@b"},
		{"redis://h:1/?password=pw&db=2", "redis://h:1/?password=xxxxx&db=2"},
		{"host=db password='se cr\\'et' dbname=x", "host=db password=xxxxx dbname=x"},
		{"host=db password=secret", "host=db password=xxxxx"},
		{"access_token=abc sslmode=disable", "access_token=xxxxx sslmode=disable"},
		{`a "redis://u:p@h" b "redis://v:q@i"`, `a "redis://u:xxxxx@i"`},
		{"x redis://u:p@h\ny redis://v:q@i", "x redis://u:xxxxx@h\ny redis://v:xxxxx@i"},
	} {
		if got := String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := String(String(tc.in)); got != String(tc.in) {
			t.Errorf("String is not idempotent on %q: %q, then %q", tc.in, String(tc.in), got)
		}
	}
}

// templates place a password as settings, DSNs and error messages
// carry it; each returns the text and the forms of the password that
// must not be seen in it once masked.
var templates = []func(pw string) (string, []string){
	func(pw string) (string, []string) { return "redis://alice:" + pw + "@127.0.0.1:6379/0", []string{pw} },
	func(pw string) (string, []string) { return "rediss://:" + pw + "@h:1?addr=h:2", []string{pw} },
	func(pw string) (string, []string) {
		return "postgres://u:" + pw + "@db:5432/x?sslmode=disable", []string{pw}
	},
	func(pw string) (string, []string) {
		q := url.QueryEscape(pw)
		return "redis://h:1/0?password=" + q + "&db=1", []string{pw, q}
	},
	func(pw string) (string, []string) {
		esc := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(pw)
		return "host=db password='" + esc + "' dbname=x", []string{pw, esc}
	},
	func(pw string) (string, []string) {
		u := "redis://u:" + pw + "@h:1"
		q := strconv.Quote(pw)
		return fmt.Sprintf("redis: %q is not a redis:// URL: parse %q: invalid", u, u), []string{pw, q[1 : len(q)-1]}
	},
}

// FuzzString: no password, whatever bytes it holds (a line's worth:
// no newline), is left in a URL, a DSN or a message quoting them; and
// masking twice changes nothing more.
func FuzzString(f *testing.F) {
	for _, s := range []string{"p%w", "p#w", "p/w", "p w", "p@w", "a://b", "p'w\\", `p"w`, "pw&x=y", "é\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, pw string) {
		if strings.ContainsAny(pw, "\nx") || len(pw) < 3 {
			return // masking is per line; 'x' is the mask's own letter
		}
		for i, tmpl := range templates {
			s, secrets := tmpl(pw)
			empty, _ := tmpl("")
			out := String(s)
			for _, secret := range secrets {
				if strings.Contains(empty, secret) {
					continue // the secret is a piece of the template itself
				}
				if strings.Contains(out, secret) {
					t.Fatalf("template %d: String(%q) = %q still holds %q", i, s, out, secret)
				}
			}
			if again := String(out); again != out {
				t.Fatalf("template %d: masking %q again gives %q", i, out, again)
			}
		}
	})
}
