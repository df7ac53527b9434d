package auth

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		glob, topic string
		want        bool
	}{
		{"*", "anything/at.all", true},
		{"order*", "orderclose", true},
		{"order*", "order", true},
		{"order*", "xorder", false},
		{"*.close", "order.close", true},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"exact", "exact", true},
		{"exact", "exact2", false},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZ", false},
	} {
		if got := Match(c.glob, c.topic); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.glob, c.topic, got, c.want)
		}
	}
}

const fileText = `{"tokens": [
  {"name": "shop", "sha256": "%SHOP%", "scopes": ["produce"], "topics": ["order*"]},
  {"name": "worker", "client_names": ["worker-1.internal"], "scopes": ["consume", "read"], "topics": ["order*", "mail"]},
  {"name": "ops", "sha256": "%OPS%", "scopes": ["admin"]}
]}`

func writeFile(t *testing.T, shop, ops string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "auth.json")
	text := strings.NewReplacer("%SHOP%", HashToken(shop), "%OPS%", HashToken(ops)).Replace(fileText)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestStoreScopesAndReload(t *testing.T) {
	t.Parallel()
	p := writeFile(t, "shop-token", "ops-token")
	s, err := Load(p, "")
	if err != nil {
		t.Fatal(err)
	}
	shop := s.ByToken("shop-token")
	if shop == nil || shop.Name != "shop" {
		t.Fatalf("ByToken(shop) = %+v", shop)
	}
	if !shop.Allows(Produce, "orderclose") || shop.Allows(Produce, "mail") || shop.Allows(Consume, "orderclose") {
		t.Error("shop's scopes are wrong")
	}
	if shop.AllowsAll(Produce) || !shop.AllowsSome(Produce) {
		t.Error("shop's breadth is wrong")
	}
	ops := s.ByToken("ops-token")
	if !ops.AllowsAll(Read) || !ops.Allows(Consume, "x") {
		t.Error("admin must imply every scope on every topic")
	}
	if s.ByToken("wrong") != nil || s.ByToken("") != nil {
		t.Error("an unknown token must be nobody")
	}
	w := s.ByCert(&x509.Certificate{Subject: pkix.Name{CommonName: "worker-1.internal"}})
	if w == nil || !w.Allows(Consume, "mail") || w.Allows(Produce, "mail") {
		t.Errorf("ByCert = %+v", w)
	}
	if s.ByCert(&x509.Certificate{DNSNames: []string{"worker-1.internal"}}) != w {
		t.Error("a DNS SAN must map like the common name")
	}

	// Rotate the shop token: the old one stops working after Reload; a bad
	// file keeps the table in force.
	q := writeFile(t, "shop-token-2", "ops-token")
	b, _ := os.ReadFile(q)
	os.WriteFile(p, b, 0o600)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if s.ByToken("shop-token") != nil || s.ByToken("shop-token-2") == nil {
		t.Error("Reload did not swap the token")
	}
	os.WriteFile(p, []byte(`{"tokens": [{"name": "x"`), 0o600)
	if err := s.Reload(); err == nil {
		t.Error("a broken file reloaded without error")
	}
	if s.ByToken("shop-token-2") == nil {
		t.Error("a broken file must leave the old table in force")
	}
}

func TestOpenAndNobody(t *testing.T) {
	t.Parallel()
	var s *Store // no tokens configured
	if p := s.ByToken(""); !p.AllowsAll(Admin) {
		t.Error("without tokens everyone is allowed")
	}
	var nobody *Principal
	if nobody.Allows(Read, "x") || nobody.AllowsSome(Read) || nobody.AllowsAll(Read) {
		t.Error("nobody is allowed nothing")
	}
	if s, err := Load("", ""); s != nil || err != nil {
		t.Errorf("Load with nothing = %v, %v", s, err)
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	for name, text := range map[string]string{
		"token in clear":  `{"tokens":[{"name":"a","sha256":"secret","scopes":["admin"]}]}`,
		"unknown field":   `{"tokens":[{"name":"a","sha256":"` + HashToken("x") + `","scopes":["admin"],"topic":["a"]}]}`,
		"unknown scope":   `{"tokens":[{"name":"a","sha256":"` + HashToken("x") + `","scopes":["root"]}]}`,
		"no way in":       `{"tokens":[{"name":"a","scopes":["admin"]}]}`,
		"duplicate names": `{"tokens":[{"name":"a","sha256":"` + HashToken("x") + `","scopes":["read"]},{"name":"a","sha256":"` + HashToken("y") + `","scopes":["read"]}]}`,
		"two values":      `{"tokens":[]} {}`,
		"no scopes":       `{"tokens":[{"name":"a","sha256":"` + HashToken("x") + `"}]}`,
	} {
		if _, err := Parse([]byte(text)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzParse: any input is refused with an error or parses into entries
// that build into a table; nothing panics.
func FuzzParse(f *testing.F) {
	f.Add([]byte(strings.NewReplacer("%SHOP%", HashToken("a"), "%OPS%", HashToken("b")).Replace(fileText)))
	f.Add([]byte(`{"tokens":[]}`))
	f.Add([]byte(`{"tokens":[{"name":"a","client_names":["x"],"scopes":["read"],"topics":["*"]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse(b)
		if err != nil {
			return
		}
		tab, err := build(file.Tokens)
		if err != nil {
			return
		}
		for h, p := range tab.byHash {
			if p == nil || !isHexHash(h) {
				t.Fatalf("bad entry %q", h)
			}
		}
	})
}

// FuzzMatch: a glob matches itself when it has no wildcards, and "*"
// matches everything.
func FuzzMatch(f *testing.F) {
	f.Add("order*", "orderclose")
	f.Add("a*b?c", "aXXbYc")
	f.Fuzz(func(t *testing.T, glob, topic string) {
		Match(glob, topic)
		if !Match("*", topic) {
			t.Fatal("* must match everything")
		}
		if !strings.ContainsAny(topic, "*?") && !Match(topic, topic) {
			t.Fatalf("%q does not match itself", topic)
		}
	})
}
