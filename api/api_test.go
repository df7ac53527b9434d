package api

import (
	"encoding/json"
	"testing"
	"time"
)

// TestTimeNeverEarlier: a due time with sub-millisecond precision goes on
// the wire rounded up, so the server never fires it before it was asked.
func TestTimeNeverEarlier(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 123_400_000, time.UTC)
	b, err := json.Marshal(Time{at})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `"2030-01-02T03:04:05.124Z"`; got != want {
		t.Errorf("Marshal(%s) = %s, want %s", at, got, want)
	}
	var back Time
	if err := json.Unmarshal(b, &back); err != nil || back.Before(at) {
		t.Errorf("round trip of %s = %s, %v: earlier than asked", at, back.Time, err)
	}
	whole := time.Date(2030, 1, 2, 3, 4, 5, 123_000_000, time.FixedZone("x", 3600))
	if b, _ := json.Marshal(Time{whole}); string(b) != `"2030-01-02T02:04:05.123Z"` {
		t.Errorf("Marshal(%s) = %s, want it unchanged in UTC", whole, b)
	}
}

func TestDurationForms(t *testing.T) {
	for in, want := range map[string]time.Duration{`"1500ms"`: 1500 * time.Millisecond, `30`: 30 * time.Second, `1.5`: 1500 * time.Millisecond} {
		var d Duration
		if err := json.Unmarshal([]byte(in), &d); err != nil || time.Duration(d) != want {
			t.Errorf("Unmarshal(%s) = %v, %v; want %v", in, time.Duration(d), err, want)
		}
	}
	for _, bad := range []string{`"soon"`, `true`, `1e300`} {
		var d Duration
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("Unmarshal(%s) = nil error, want a refusal", bad)
		}
	}
}
