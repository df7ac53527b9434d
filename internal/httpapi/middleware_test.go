package httpapi

import (
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/auth"
)

// Every route of routes.go (and of the files it calls to register more)
// has an operation in guardRules that auth's table knows, and no rule
// names a route that does not exist: a route added without a rule would
// fall to "any valid token", one with an operation the table lacks would
// be open.
func TestGuardCoversEveryRoute(t *testing.T) {
	t.Parallel()
	var routes []string
	for _, file := range []string{"routes.go", "schedules.go", "pause.go", "charts.go", "policy.go", "alarms.go", "session.go"} { // every file that registers routes
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`m\.Handle(?:Func)?\("([^"]+)"`).FindAllSubmatch(src, -1) {
			if p := string(m[1]); !slices.Contains(routes, p) {
				routes = append(routes, p)
			}
		}
	}
	var rules []string
	for _, gr := range guardRules {
		rules = append(rules, gr.pattern)
		if _, ok := auth.NeedOf(gr.op); !ok {
			t.Errorf("route %q: operation %q is not in auth's table", gr.pattern, gr.op)
		}
	}
	slices.Sort(routes)
	slices.Sort(rules)
	if !slices.Equal(routes, rules) {
		t.Fatalf("routes.go has\n%q\nguardRules has\n%q", routes, rules)
	}
}

func TestHostPolicy(t *testing.T) {
	t.Parallel()
	p := NewHostPolicy([]string{"queue.internal", ".example.com", ""})
	for host, want := range map[string]bool{
		"":                      true,
		"10.1.2.3:7480":         true,
		"[fe80::1]:7480":        true,
		"localhost":             true,
		"a.localhost:1":         true,
		"queue.internal":        true,
		"Queue.Internal.:7480":  true,
		"x.example.com":         true,
		"example.com":           false,
		"evil.test":             false,
		"queue.internal.evil":   false,
		"localhost.evil.test":   false,
		"127.0.0.1.nip.io:7480": false,
	} {
		if got := p.Allowed(host); got != want {
			t.Errorf("Allowed(%q) = %v, want %v", host, got, want)
		}
	}
	if !NewHostPolicy([]string{"*"}).Allowed("anything") || !(*HostPolicy)(nil).Allowed("anything") {
		t.Error("* and a nil policy allow every host")
	}
}

// FuzzHostAllowed: any Host header is decided without a panic, a name is
// never allowed unless configured (or loopback), and case or a trailing dot
// do not change the answer.
func FuzzHostAllowed(f *testing.F) {
	for _, s := range []string{"queue.internal:7480", "[::1]:80", "evil.test", "a.localhost", "QUEUE.internal.", "[", ":", "1.2.3.4:x"} {
		f.Add(s)
	}
	p := NewHostPolicy([]string{"queue.internal"})
	f.Fuzz(func(t *testing.T, host string) {
		got := p.Allowed(host)
		ascii := !strings.ContainsFunc(host, func(r rune) bool { return r > 0x7f }) // browsers send punycode
		if ascii && got != p.Allowed(strings.ToUpper(host)) {
			t.Fatalf("case changes the answer for %q", host)
		}
		h := strings.TrimSuffix(strings.ToLower(stripPort(host)), ".")
		if got && host != "" && net.ParseIP(h) == nil && h != "localhost" && !strings.HasSuffix(h, ".localhost") && h != "queue.internal" {
			t.Fatalf("%q allowed", host)
		}
	})
}
