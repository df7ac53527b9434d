package redisstore

import (
	"strings"
	"testing"
)

// defines reports whether a linked script carries prelude's definition
// of name.
func defines(script, name string) bool {
	return strings.Contains(script, "local function "+name+"(") || strings.Contains(script, "local "+name+" =")
}

// TestLinkTakesWhatItUses links bodies against the real prelude: a
// script carries the definitions its body uses and those they use in
// turn, and no other; a name in a comment or as a field (x.earliest) is
// no use.
func TestLinkTakesWhatItUses(t *testing.T) {
	for _, tc := range []struct {
		body      string
		want, not []string
	}{
		{body: "return earliest()", want: []string{"earliest", "K_DELAYED", "K_RESERVED", "K_B"}, not: []string{"find", "K_JOB", "serverMS"}},
		// find uses load and locate, which use K_JOB and K_IDS, which use K_B.
		{body: "local j = find('id', ARGV[1])\nreturn j", want: []string{"find", "load", "locate", "K_JOB", "K_IDS", "K_B"}, not: []string{"earliest", "K_READY", "reply"}},
		{body: "-- earliest() is not called here\nlocal t = {}\nreturn t.earliest", not: []string{"earliest", "K_DELAYED", "K_B"}},
		{body: "return 1", not: []string{"K_B", "clock", "earliest"}},
	} {
		got := link(tc.body)
		if !strings.HasSuffix(got, tc.body) {
			t.Errorf("link(%q) does not end with the body:\n%s", tc.body, got)
		}
		for _, n := range tc.want {
			if !defines(got, n) {
				t.Errorf("link(%q) lacks the definition of %s:\n%s", tc.body, n, got)
			}
		}
		for _, n := range tc.not {
			if defines(got, n) {
				t.Errorf("link(%q) carries %s, which it does not use:\n%s", tc.body, n, got)
			}
		}
	}
	// In prelude's order: a definition comes before its uses.
	got := link("return find('id', ARGV[1])")
	if i, j := strings.Index(got, "local K_B ="), strings.Index(got, "local function find("); i < 0 || j < i {
		t.Errorf("K_B at %d, find at %d: want K_B first, as in prelude", i, j)
	}
}

// BenchmarkLink is what the package's init pays per script, in every
// process that links it (each delayq command and test binary): a short
// body, and one that uses every definition.
func BenchmarkLink(b *testing.B) {
	for name, body := range map[string]string{"short": "return earliest()", "all": prelude + "return 1"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				link(body)
			}
		})
	}
}
