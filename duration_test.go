package delayq

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"30s": 30 * time.Second, "1500ms": 1500 * time.Millisecond, "7d": 7 * 24 * time.Hour,
		"1d12h": 36 * time.Hour, "1.5d": 36 * time.Hour, "-2d": -48 * time.Hour, "0d": 0,
	} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"d", "7dd", "soon", "1d2x", "", "999999999d"} {
		if got, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %s, want an error", in, got)
		}
	}
}
