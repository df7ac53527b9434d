package alarm

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/delayq/delayq"
)

// testNets lets the tests' receivers, on loopback, get events.
var testNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// none allows no network beyond the public ones (the default).
var none = []netip.Prefix{}

func TestKindOf(t *testing.T) {
	for _, tc := range []struct {
		ip      string
		refused bool
	}{
		{"127.0.0.1", true}, {"127.3.2.1", true}, {"::1", true}, {"::ffff:127.0.0.1", true},
		{"169.254.169.254", true}, {"fe80::1", true}, {"10.1.2.3", true}, {"172.16.0.1", true},
		{"192.168.1.1", true}, {"fc00::1", true}, {"0.0.0.0", true}, {"::", true}, {"0.1.2.3", true},
		{"100.100.100.200", true}, {"224.0.0.1", true}, {"255.255.255.255", true},
		{"64:ff9b::7f00:1", true}, {"2002:7f00:1::", true}, {"64:ff9b::a9fe:a9fe", true},
		{"8.8.8.8", false}, {"1.1.1.1", false}, {"2606:4700::1111", false}, {"64:ff9b::808:808", false},
	} {
		if got := kindOf(netip.MustParseAddr(tc.ip)); (got != "") != tc.refused {
			t.Errorf("kindOf(%s) = %q, want refused %v", tc.ip, got, tc.refused)
		}
	}
	p := destPolicy{allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	if p.check(netip.MustParseAddr("10.9.8.7")) != nil || p.check(netip.MustParseAddr("192.168.0.1")) == nil {
		t.Error("an allowed network is refused, or another private one is not")
	}
}

// An alarm whose URL names a loopback, link-local or private address
// (or localhost) is refused when it is created, with a clear error, and
// nothing is stored; a public address or a name is taken.
func TestPutRefusesInternalAddresses(t *testing.T) {
	f := newFixture(t, Config{AllowNets: none})
	for _, u := range []string{
		"http://127.0.0.1:7480/v1/jobs", "http://[::1]:8080/", "http://169.254.169.254/latest/meta-data/",
		"http://localhost:7480/", "http://10.0.0.1/hook", "http://[::ffff:192.168.1.1]/", "https://0.0.0.0/",
	} {
		a, err := Parse("internal", []byte(`{"url":"`+u+`","when":{"buried_over":0}}`))
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = f.svc.Put(context.Background(), a)
		var ve *delayq.ValidationError
		if !errors.As(err, &ve) || ve.Code != delayq.CodeBadURL || !strings.Contains(err.Error(), "--webhook-allow-nets") {
			t.Errorf("Put(url %s) = %v, want bad_url naming --webhook-allow-nets", u, err)
		}
	}
	if as, _ := f.svc.List(context.Background()); len(as) != 0 {
		t.Errorf("refused alarms were stored: %d", len(as))
	}
	for _, u := range []string{"https://hooks.example.com/x", "http://8.8.8.8/"} {
		a, _ := Parse("public", []byte(`{"url":"`+u+`","when":{"buried_over":0}}`))
		if _, _, err := f.svc.Put(context.Background(), a); err != nil {
			t.Errorf("Put(url %s) = %v, want it taken", u, err)
		}
	}
}

// logBuffer collects a service's log.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitLog waits until the log holds want (the give-up line is logged
// just after the counter waitGivenUp reads moves).
func waitLog(t *testing.T, log *logBuffer, want string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(log.String(), want); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the log does not say %q within 10s:\n%s", want, log.String())
		}
	}
}

// waitGivenUp waits until svc has given up n events.
func waitGivenUp(t *testing.T, svc *Service, n float64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); testutil.ToFloat64(svc.met.events.WithLabelValues(outcomeGivenUp)) < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no event given up within 10s")
		}
	}
}

// The address is checked when the connection is made, whatever the
// alarm's creation let through: an instance that does not allow
// loopback sends nothing to a loopback receiver even though the alarm
// (put by another instance that does, sharing the store) names it, as a
// name that resolves elsewhere at creation and to 127.0.0.1 later
// would; the log says why.
func TestDeliveryRefusedAtConnect(t *testing.T) {
	got := make(chan struct{}, 10)
	rcv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { got <- struct{}{} }))
	defer rcv.Close()
	f := newFixture(t, Config{}) // allows loopback: creates the alarm
	var log logBuffer
	strict := f.service(Config{AllowNets: none, Retries: -1, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	f.set("inward", `{"url":"`+rcv.URL+`","when":{"buried_over":0}}`)
	f.bury("t", "a")
	f.eval(strict, time.Now())
	waitGivenUp(t, strict, 1)
	waitLog(t, &log, "giving up")
	select {
	case <-got:
		t.Fatal("the event reached a loopback receiver")
	default:
	}
	if l := log.String(); !strings.Contains(l, "is a loopback address") {
		t.Errorf("the log does not say the address was refused:\n%s", l)
	}
}

// A receiver that answers a redirect does not make the server send the
// event, its signature and its headers elsewhere: the redirect is not
// followed, and the failure names it.
func TestRedirectNotFollowed(t *testing.T) {
	elsewhere, reqs := newRawReceiver(t)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/stolen", http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	var log logBuffer
	f := newFixture(t, Config{Retries: -1, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	f.set("r", `{"url":"`+redirector.URL+`","when":{"buried_over":0},"secret":"s3cret","headers":{"X-Api-Key":"k3y"}}`)
	f.bury("t", "a")
	f.eval(f.svc, time.Now())
	waitGivenUp(t, f.svc, 1)
	waitLog(t, &log, "giving up")
	select {
	case r := <-reqs:
		t.Fatalf("the redirect was followed: %s got the event with X-Api-Key %q", elsewhere.URL, r.header.Get("X-Api-Key"))
	default:
	}
	if l := log.String(); !strings.Contains(l, "redirects are not followed") {
		t.Errorf("the log does not name the redirect:\n%s", l)
	}
}

// A failing alarm's URL is logged with its password masked, on every
// retry and when it is given up.
func TestFailingAlarmLogMasksPassword(t *testing.T) {
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer rcv.Close()
	var log logBuffer
	f := newFixture(t, Config{Retries: 1, Backoff: time.Millisecond, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	u := strings.Replace(rcv.URL, "http://", "http://alice:TopSecretPw@", 1)
	f.set("pw", `{"url":"`+u+`","when":{"buried_over":0}}`)
	f.bury("t", "a")
	f.eval(f.svc, time.Now())
	waitGivenUp(t, f.svc, 1)
	waitLog(t, &log, "giving up")
	l := log.String()
	if strings.Contains(l, "TopSecretPw") || !strings.Contains(l, "alice:xxxxx@") {
		t.Errorf("the log shows the password, or no masked URL:\n%s", l)
	}
}
