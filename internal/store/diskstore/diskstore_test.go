package diskstore

import (
	"testing"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/storetest"
)

// openAt opens the store in dir and fails the test on error.
func openAt(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s) = %v, want nil", dir, err)
	}
	return s
}

func TestConformance(t *testing.T) {
	dirs := map[store.Store]string{}
	storetest.Run(t, storetest.Factory{
		Open: func(t *testing.T) store.Store {
			dir := t.TempDir()
			s := openAt(t, dir, Options{})
			dirs[s] = dir
			return s
		},
		Reopen: func(t *testing.T, s store.Store) store.Store {
			dir := dirs[s]
			if err := s.Close(); err != nil {
				t.Fatalf("Close() = %v, want nil", err)
			}
			r := openAt(t, dir, Options{})
			dirs[r] = dir
			return r
		},
	})
}
