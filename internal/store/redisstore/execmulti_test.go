package redisstore

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/store"
)

// TestScriptsAreNotReloadedPerCall: a reserve over several topics runs
// one peek script per topic; rueidis's Lua.ExecMulti sent SCRIPT LOAD
// to every node before each such call (three per put, seven per
// put+reserve+delete on a 3-master Cluster). The store's calls load a
// script only when a node lacks it.
func TestScriptsAreNotReloadedPerCall(t *testing.T) {
	addrs := redisAddrs(t, "DELAYQ_TEST_REDIS")
	s := openStore(t, addrs, Options{})
	defer s.Close()
	ctx := t.Context()
	loads := func() int { return commandCalls(t, s, "script|load") }
	reserve := func() {
		t.Helper()
		if _, err := s.Reserve(ctx, store.ReserveParams{Topics: []string{"a", "b", "c"}, Max: 1, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	reserve() // the first call may load the scripts
	before := loads()
	const calls = 20
	for range calls {
		reserve()
	}
	// Other packages' stores may share this Redis; none of them loads a
	// script per call either, so the count stays well below one per call.
	if n := loads() - before; n >= calls {
		t.Fatalf("%d SCRIPT LOADs for %d reserves over 3 topics: the scripts are reloaded on every call", n, calls)
	}
}

// commandCalls is how many times Redis has run command (INFO
// commandstats, "publish" or "script|load"), by every client.
func commandCalls(t *testing.T, s *Store, command string) int {
	t.Helper()
	info := ok(s.c.Do(t.Context(), s.c.B().Info().Section("commandstats").Build()).ToString())(t)
	for _, line := range strings.Split(info, "\n") {
		if rest, found := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+command+":calls="); found {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}
