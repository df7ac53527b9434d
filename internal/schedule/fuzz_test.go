package schedule

import (
	"errors"
	"testing"
	"time"

	"github.com/delayq/delayq"
)

// FuzzParseTiming: any spec and zone either parse or answer a named
// validation error; a parsed spec's ticks move forward, land on whole
// milliseconds, and prev undoes next.
func FuzzParseTiming(f *testing.F) {
	for _, s := range []string{
		"0 */5 * * * *", "*/5 * * * *", "@every 90s", "@every 100ms", "@hourly", "@daily", "@weekly",
		"0 0 0 31 2 *", "0 30 2 * * *", "0 0 9 1 * MON", "TZ=UTC * * * * *", "@every -1s", "", "* * *",
		"0 0 0 29 2 *", "59 59 23 31 12 *",
	} {
		f.Add(s, "Europe/Berlin")
		f.Add(s, "")
	}
	f.Add("@daily", "America/Argentina/Buenos_Aires")
	f.Add("@daily", "Nowhere")
	now := time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, spec, tz string) {
		tm, err := parseTiming(spec, tz, now)
		if err != nil {
			var ve *delayq.ValidationError
			if !errors.As(err, &ve) || ve.Code == "" {
				t.Fatalf("parseTiming(%q, %q) = %v, not a named validation error", spec, tz, err)
			}
			return
		}
		anchor := now.Add(-7 * time.Millisecond)
		t1 := tm.next(now, anchor)
		if t1.IsZero() {
			if tm.every > 0 {
				t.Fatalf("@every has no next")
			}
			return
		}
		if !t1.After(now) || t1.Truncate(time.Millisecond) != t1 {
			t.Fatalf("next(%v) = %v: not after it or not whole ms", now, t1)
		}
		t2 := tm.next(t1, anchor)
		if !t2.IsZero() && !t2.After(t1) {
			t.Fatalf("next(%v) = %v, not after it", t1, t2)
		}
		if t2.IsZero() {
			return
		}
		// prev undoes next for @every; for cron the library's prev may
		// skip a tick next moved out of a DST gap, so only its direction
		// holds, and newest (which walks forward) must find t1.
		if p := tm.prev(t2, anchor); tm.every > 0 && !p.Equal(t1) || !p.IsZero() && !p.Before(t2) {
			t.Fatalf("prev(%v) = %v (next gave %v)", t2, p, t1)
		}
		if n := tm.newest(now, t2.Add(-time.Millisecond), anchor); !n.Equal(t1) {
			t.Fatalf("newest(%v, %v) = %v, want %v", now, t2.Add(-time.Millisecond), n, t1)
		}
	})
}
