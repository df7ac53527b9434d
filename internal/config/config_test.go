package config

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDefaultIsValid(t *testing.T) {
	t.Parallel()
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v, want nil", err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		modify func(c *Config)
		want   []string // field names the error must name, in order
	}{
		{"defaults", func(c *Config) {}, nil},
		{"port zero", func(c *Config) { c.HTTPAddr = "127.0.0.1:0" }, nil},
		{"all interfaces", func(c *Config) { c.HTTPAddr = ":7480" }, nil},
		{"https advertise", func(c *Config) { c.AdvertiseURL = "https://q.example.com" }, nil},
		{"upper-case level", func(c *Config) { c.LogLevel = "DEBUG" }, nil},
		{"addr without port", func(c *Config) { c.HTTPAddr = "localhost" }, []string{"http-addr"}},
		{"addr bad port", func(c *Config) { c.HTTPAddr = "localhost:99999" }, []string{"http-addr"}},
		{"debug addr", func(c *Config) { c.DebugAddr = "127.0.0.1:6060" }, nil},
		{"debug addr without port", func(c *Config) { c.DebugAddr = "localhost" }, []string{"debug-addr"}},
		{"tiny cache", func(c *Config) { c.CacheMiB = 1 }, []string{"cache-mib"}},
		{"tiny cache with redis", func(c *Config) { c.CacheMiB = 0; c.Redis = "redis://127.0.0.1:1/0" }, nil},
		{"redis settings", func(c *Config) {
			c.Redis, c.RedisPrefix, c.RedisBuckets, c.RedisWaitReplicas = "redis://127.0.0.1:1/0", "team-a.prod", 64, 2
		}, nil},
		{"redis prefix with a colon", func(c *Config) { c.Redis, c.RedisPrefix = "redis://127.0.0.1:1/0", "a:b" }, []string{"redis-prefix"}},
		{"redis prefix with a hash tag", func(c *Config) { c.Redis, c.RedisPrefix = "redis://127.0.0.1:1/0", "{a}" }, []string{"redis-prefix"}},
		{"redis zero buckets", func(c *Config) { c.Redis, c.RedisBuckets = "redis://127.0.0.1:1/0", 0 }, []string{"redis-buckets"}},
		{"redis negative replicas", func(c *Config) { c.Redis, c.RedisWaitReplicas = "redis://127.0.0.1:1/0", -1 }, []string{"redis-wait-replicas"}},
		{"redis zero wait timeout", func(c *Config) { c.Redis, c.RedisWaitTimeout = "redis://127.0.0.1:1/0", 0 }, []string{"redis-wait-timeout"}},
		{"redis settings ignored without redis", func(c *Config) { c.RedisPrefix = "a:b" }, nil},
		{"empty data dir", func(c *Config) { c.DataDir = " " }, []string{"data-dir"}},
		{"zero body", func(c *Config) { c.MaxBody = 0 }, []string{"max-body"}},
		{"huge body", func(c *Config) { c.MaxBody = MaxBodyLimit + 1 }, []string{"max-body"}},
		{"zero wait", func(c *Config) { c.MaxWait = 0 }, []string{"max-wait"}},
		{"long wait", func(c *Config) { c.MaxWait = 2 * time.Hour }, []string{"max-wait"}},
		{"no topics", func(c *Config) { c.MaxReserveTopics = 0 }, []string{"max-reserve-topics"}},
		{"advertise no scheme", func(c *Config) { c.AdvertiseURL = "q.example.com:7480" }, []string{"advertise-url"}},
		{"advertise ftp", func(c *Config) { c.AdvertiseURL = "ftp://q" }, []string{"advertise-url"}},
		{"zero shutdown", func(c *Config) { c.ShutdownTimeout = 0 }, []string{"shutdown-timeout"}},
		{"alarm interval too short", func(c *Config) { c.AlarmInterval = time.Millisecond }, []string{"alarm-interval"}},
		{"alarm interval negative", func(c *Config) { c.AlarmInterval = -time.Second }, []string{"alarm-interval"}},
		{"alarm interval too long", func(c *Config) { c.AlarmInterval = 2 * time.Hour }, []string{"alarm-interval"}},
		{"webhook network not a network", func(c *Config) { c.WebhookAllowNets = []string{"10.0.0.0/8", "intranet"} }, []string{"webhook-allow-nets"}},
		{"fsync window", func(c *Config) { c.Fsync = 50 * time.Millisecond }, nil},
		{"fsync window too short", func(c *Config) { c.Fsync = time.Microsecond }, []string{"fsync"}},
		{"fsync window too long", func(c *Config) { c.Fsync = time.Hour }, []string{"fsync"}},
		{"fsync window with redis", func(c *Config) { c.Fsync = 50 * time.Millisecond; c.Redis = "redis://127.0.0.1:1/0" }, []string{"fsync"}},
		{"bad level", func(c *Config) { c.LogLevel = "loud" }, []string{"log-level"}},
		{"bad format", func(c *Config) { c.LogFormat = "xml" }, []string{"log-format"}},
		{
			name: "every problem at once",
			modify: func(c *Config) {
				*c = Config{HTTPAddr: "nope", LogLevel: "loud", LogFormat: "xml", AdvertiseURL: "x"}
			},
			want: []string{"http-addr", "data-dir", "cache-mib", "max-body", "max-wait", "max-reserve-topics",
				"advertise-url", "shutdown-timeout", "log-level", "log-format"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Default()
			tt.modify(&c)
			err := c.Validate()
			var got []string
			if err != nil {
				for _, line := range strings.Split(err.Error(), "\n") {
					field, _, _ := strings.Cut(line, ":")
					got = append(got, field)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Validate() = %v; fields named (-want +got):\n%s", err, diff)
			}
		})
	}
}

func TestAdvertiseURLFor(t *testing.T) {
	t.Parallel()
	bound := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 41234}
	tests := []struct {
		name      string
		advertise string
		bound     net.Addr
		want      string
	}{
		{"from bound address", "", bound, "http://127.0.0.1:41234"},
		{"explicit wins", "http://q.example.com:80/", bound, "http://q.example.com:80"},
		{"ipv6 loopback", "", &net.TCPAddr{IP: net.IPv6loopback, Port: 7480}, "http://[::1]:7480"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Default()
			c.AdvertiseURL = tt.advertise
			if got := c.AdvertiseURLFor(tt.bound); got != tt.want {
				t.Errorf("AdvertiseURLFor(%v) = %q, want %q", tt.bound, got, tt.want)
			}
		})
	}
	t.Run("wildcard host is replaced", func(t *testing.T) {
		t.Parallel()
		got := Default().AdvertiseURLFor(&net.TCPAddr{IP: net.IPv4zero, Port: 7480})
		if strings.Contains(got, "0.0.0.0") || !strings.HasSuffix(got, ":7480") {
			t.Errorf("AdvertiseURLFor(0.0.0.0:7480) = %q, want a dialable host with port 7480", got)
		}
	})
}

func TestParseNets(t *testing.T) {
	got, err := ParseNets([]string{"10.1.2.3/8", "127.0.0.1", " ::1 ", "::ffff:192.168.0.1"})
	want := []string{"10.0.0.0/8", "127.0.0.1/32", "::1/128", "192.168.0.1/32"}
	if err != nil || len(got) != len(want) {
		t.Fatalf("ParseNets = %v, %v", got, err)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("ParseNets[%d] = %s, want %s", i, got[i], want[i])
		}
	}
}
