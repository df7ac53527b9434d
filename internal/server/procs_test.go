package server

import "testing"

// The store lends its flushes and compactions a P each unless GOMAXPROCS
// is set in the environment.
func TestBackgroundP(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	if !backgroundP() {
		t.Error("backgroundP() = false without GOMAXPROCS in the environment, want true")
	}
	t.Setenv("GOMAXPROCS", "2")
	if backgroundP() {
		t.Error("backgroundP() = true with GOMAXPROCS=2 in the environment, want false (kept as given)")
	}
}
