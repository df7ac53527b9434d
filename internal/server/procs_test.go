package server

import (
	"testing"

	"github.com/delayq/delayq/internal/config"
)

// TestStoreLeavesGOMAXPROCS: the server's embedded store does not raise
// and lower GOMAXPROCS around Pebble's flushes and compactions (each
// change stops the world), with or without GOMAXPROCS in the environment.
func TestStoreLeavesGOMAXPROCS(t *testing.T) {
	for _, env := range []string{"", "2"} {
		t.Setenv("GOMAXPROCS", env)
		if New(config.Default(), nil).diskOptions().BackgroundP {
			t.Errorf("with GOMAXPROCS=%q the store lends Ps to its background work, want it to leave GOMAXPROCS alone", env)
		}
	}
}
