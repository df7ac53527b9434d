package server

import "testing"

// A server on the embedded store runs with one Go P more than the
// default, for the store's low-priority background work, unless the
// environment sets GOMAXPROCS.
func TestBackgroundProcs(t *testing.T) {
	for _, c := range []struct {
		env           string
		current, want int
	}{
		{"", 2, 3},
		{"", 1, 2},
		{"2", 2, 2},
		{"8", 8, 8},
	} {
		if got := backgroundProcs(c.env, c.current); got != c.want {
			t.Errorf("backgroundProcs(GOMAXPROCS=%q, %d) = %d, want %d", c.env, c.current, got, c.want)
		}
	}
}
