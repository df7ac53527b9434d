package redisstore

import (
	"os"
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/storetest"
)

// redisAddrs returns the Redis seeds named by env (host:port, comma
// separated). Without them the test skips, except under CI=true, where a
// missing Redis is a failure: CI must run these tests.
func redisAddrs(t *testing.T, env string) []string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set; CI must run the Redis tests (source <(scripts/redis-test-env.sh))", env)
		}
		t.Skipf("%s is not set; run `source <(scripts/redis-test-env.sh)` to run the Redis tests", env)
	}
	return strings.Split(v, ",")
}

// openStore opens a store under a fresh key prefix, so every test has an
// empty deployment of its own on the shared Redis.
func openStore(t *testing.T, addrs []string, opt Options) *Store {
	t.Helper()
	opt.Addrs = addrs
	if opt.Prefix == "" {
		opt.Prefix = "t" + nonce()
	}
	s, err := New(t.Context(), opt)
	if err != nil {
		t.Fatalf("New(%v) = %v", addrs, err)
	}
	return s
}

func factory(addrs []string) storetest.Factory {
	return storetest.Factory{
		Open: func(t *testing.T) store.Store { return openStore(t, addrs, Options{}) },
		Reopen: func(t *testing.T, s store.Store) store.Store {
			prefix := s.(*Store).opt.Prefix
			if err := s.Close(); err != nil {
				t.Fatalf("Close() = %v", err)
			}
			return openStore(t, addrs, Options{Prefix: prefix})
		},
	}
}

func TestConformanceStandalone(t *testing.T) {
	storetest.Run(t, factory(redisAddrs(t, "DELAYQ_TEST_REDIS")))
}

func TestConformanceCluster(t *testing.T) {
	storetest.Run(t, factory(redisAddrs(t, "DELAYQ_TEST_REDIS_CLUSTER")))
}
