package cli

import (
	"strings"
	"testing"
)

// TestServeRedisFlags: the Redis flags reach the configuration (a bad
// value is refused by name before anything starts), and --help lists
// every one of them with its environment variable.
func TestServeRedisFlags(t *testing.T) {
	code, _, errOut := run(t, "serve", "--redis", "redis://127.0.0.1:1/0", "--redis-prefix", "a:b",
		"--redis-buckets", "0", "--redis-wait-replicas=-1", "--redis-wait-timeout", "2m")
	if code == 0 {
		t.Fatal("serve with bad Redis settings exited 0")
	}
	for _, want := range []string{"redis-prefix", "redis-buckets", "redis-wait-replicas", "redis-wait-timeout"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("serve with a bad %s: stderr %q does not name it", want, errOut)
		}
	}
	t.Setenv("DELAYQ_REDIS_BUCKETS", "2000")
	if code, _, errOut := run(t, "serve", "--redis", "redis://127.0.0.1:1/0"); code == 0 || !strings.Contains(errOut, "redis-buckets: 2000 is out of range") {
		t.Errorf("DELAYQ_REDIS_BUCKETS=2000: exit %d, stderr %q; want a refusal naming redis-buckets", code, errOut)
	}
	_, out, _ := run(t, "serve", "--help")
	for _, want := range []string{"--redis-prefix", "DELAYQ_REDIS_PREFIX", "--redis-buckets", "DELAYQ_REDIS_BUCKETS",
		"--redis-volatile", "DELAYQ_REDIS_VOLATILE", "--redis-wait-replicas", "DELAYQ_REDIS_WAIT_REPLICAS",
		"--redis-wait-timeout", "DELAYQ_REDIS_WAIT_TIMEOUT"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve --help lacks %s", want)
		}
	}
}
