package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/delayq/delayq"
)

func TestFailoverToLiveServer(t *testing.T) {
	t.Parallel()
	a, b := delayqtestServer(t), delayqtestServer(t)
	c := New([]string{a.URL, b.URL}, RetryWait(0))
	defer c.Close()
	p := c.Producer()
	ctx := t.Context()

	// Both up: puts are spread over both servers.
	for range 10 {
		if _, err := p.Delay(ctx, "spread", nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	na := topicCounts(t, New([]string{a.URL}, Discovery(0)), "spread")[0]
	nb := topicCounts(t, New([]string{b.URL}, Discovery(0)), "spread")[0]
	if na == 0 || nb == 0 || na+nb != 10 {
		t.Errorf("puts landed %d on a, %d on b; want 10 spread over both", na, nb)
	}

	a.Stop()
	for i := range 5 {
		if _, err := p.Delay(ctx, "after", []byte("x"), 0, ID("after-"+string(rune('a'+i)))); err != nil {
			t.Fatalf("put %d with a down = %v, want it to fail over to b", i, err)
		}
	}
	if got := topicCounts(t, New([]string{b.URL}, Discovery(0)), "after"); got[0] != 5 {
		t.Errorf("b has %v of topic after, want 5 ready", got)
	}
	// A consumer given both addresses keeps working from b.
	var handled atomic.Int32
	cs := NewConsumer(nil, "after", UseClient(c), Concurrency(2))
	stop := consume(t, cs, func(context.Context, *Job) error { handled.Add(1); return nil })
	waitFor(t, "b's jobs consumed", func() bool { return handled.Load() == 5 })
	stop()
}

func TestAllServersDownFailsBounded(t *testing.T) {
	t.Parallel()
	a := delayqtestServer(t)
	a.Stop()
	c := New([]string{a.URL, "127.0.0.1:1"}, CallAttempts(3), RetryWait(0))
	defer c.Close()
	_, err := c.Get(t.Context(), "x")
	if !errors.Is(err, delayq.ErrUnavailable) {
		t.Errorf("Get with every server down = %v, want ErrUnavailable", err)
	}
}

// dropProxy forwards requests to a server, but for the first drops puts it
// closes the connection after the server applied the request, before any
// answer: the client cannot tell whether its put happened.
type dropProxy struct {
	*httptest.Server
	backend string
	drops   atomic.Int32
	mu      sync.Mutex
	puts    int // guarded by mu: puts forwarded
	// afterDrop, if set, runs once the server applied a put whose
	// answer is then dropped (a consumer that takes the job at once).
	afterDrop func()
}

func newDropProxy(t *testing.T, backend string, drops int) *dropProxy {
	t.Helper()
	p := &dropProxy{backend: backend}
	p.drops.Store(int32(drops))
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Close)
	return p
}

func (p *dropProxy) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, p.backend+r.URL.RequestURI(), bytes.NewReader(body))
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	isPut := r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/jobs")
	if isPut {
		p.mu.Lock()
		p.puts++
		p.mu.Unlock()
		if p.drops.Add(-1) >= 0 {
			if p.afterDrop != nil {
				p.afterDrop()
			}
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
	}
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	w.Write(data)
}

func TestPutRetryAfterLostAnswerCreatesOneJob(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		put  func(ctx context.Context, p *Producer) (string, error)
	}{
		{"producer chose the id", func(ctx context.Context, p *Producer) (string, error) {
			return p.Delay(ctx, "idem", []byte("pay"), 0, ID("idem-1"))
		}},
		{"sdk generated the id", func(ctx context.Context, p *Producer) (string, error) {
			return p.Delay(ctx, "idem", []byte("pay"), 0)
		}},
		{"batch", func(ctx context.Context, p *Producer) (string, error) {
			ids, err := p.PutBatch(ctx, "idem", []PutRequest{{Body: []byte("pay")}})
			if err != nil {
				return "", err
			}
			return ids[0], nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := delayqtestServer(t)
			proxy := newDropProxy(t, srv.URL, 1)
			c := New([]string{proxy.URL}, Discovery(0), RetryWait(0))
			defer c.Close()
			id, err := tt.put(t.Context(), c.Producer())
			if err != nil {
				t.Fatalf("put through a dropped answer = %v, want success", err)
			}
			direct := New([]string{srv.URL}, Discovery(0))
			defer direct.Close()
			if got := topicCounts(t, direct, "idem"); got != [4]int{1, 0, 0, 0} {
				t.Errorf("counts = %v, want exactly one ready job", got)
			}
			if j, err := direct.Get(t.Context(), id); err != nil || string(j.Body) != "pay" {
				t.Errorf("Get(%q) = %v, %v; want the job", id, j, err)
			}
			proxy.mu.Lock()
			defer proxy.mu.Unlock()
			if proxy.puts != 2 {
				t.Errorf("%d puts reached the server, want 2 (the lost one and its retry)", proxy.puts)
			}
		})
	}
}

func TestPutWithoutIDIsNotResentAfterLostAnswer(t *testing.T) {
	t.Parallel()
	srv := delayqtestServer(t)
	proxy := newDropProxy(t, srv.URL, 1)
	c := New([]string{proxy.URL}, Discovery(0), RetryWait(0))
	defer c.Close()
	if _, err := c.Put(t.Context(), "noid", PutRequest{Body: []byte("x")}); !errors.Is(err, delayq.ErrUnavailable) {
		t.Errorf("Put without id through a dropped answer = %v, want ErrUnavailable", err)
	}
	if got := topicCounts(t, New([]string{srv.URL}, Discovery(0)), "noid"); got != [4]int{1, 0, 0, 0} {
		t.Errorf("counts = %v, want the one job the lost attempt made, no second", got)
	}
}

func TestPutRetryReportsSomeoneElsesJob(t *testing.T) {
	t.Parallel()
	srv := delayqtestServer(t)
	direct := New([]string{srv.URL}, Discovery(0))
	defer direct.Close()
	if _, err := direct.Put(t.Context(), "other", PutRequest{ID: "k", Body: []byte("old")}); err != nil {
		t.Fatal(err)
	}
	proxy := newDropProxy(t, srv.URL, 1)
	c := New([]string{proxy.URL}, Discovery(0), RetryWait(0))
	defer c.Close()
	_, err := c.Producer().Delay(t.Context(), "other", []byte("new"), 0, ID("k"))
	if !errors.Is(err, delayq.ErrExists) {
		t.Errorf("put of a taken id through a dropped answer = %v, want ErrExists", err)
	}
}

// TestPutRetryFindsItsJobFinished: the put was applied, its answer lost,
// and a consumer finished the job before the retry arrived. The server
// keeps the finished job's id taken (--retain), so the retry answers 409
// exists, state finished, and the SDK reports the put as done: the work
// is not put, and run, a second time.
func TestPutRetryFindsItsJobFinished(t *testing.T) {
	t.Parallel()
	srv := delayqtestServer(t)
	direct := New([]string{srv.URL}, Discovery(0))
	defer direct.Close()
	proxy := newDropProxy(t, srv.URL, 1)
	proxy.afterDrop = func() {
		jobs, err := direct.Reserve(context.Background(), []string{"pay"}, 1, 0)
		if err != nil || len(jobs) != 1 {
			t.Errorf("consumer's reserve = %v, %v", jobs, err)
			return
		}
		if err := direct.Finish(context.Background(), jobs[0].ID, jobs[0].Reservation); err != nil {
			t.Errorf("consumer's finish = %v", err)
		}
	}
	c := New([]string{proxy.URL}, Discovery(0), RetryWait(0))
	defer c.Close()
	id, err := c.Producer().Delay(t.Context(), "pay", []byte("charge 42"), 0, ID("pay-42"))
	if err != nil || id != "pay-42" {
		t.Fatalf("put through a dropped answer, job finished meanwhile = %q, %v; want pay-42, success", id, err)
	}
	if got := topicCounts(t, direct, "pay"); got != [4]int{} {
		t.Errorf("counts after the retry = %v, want no live job (the retry put nothing)", got)
	}
	if j, err := direct.Get(t.Context(), "pay-42"); err != nil || j.State != delayq.StateFinished || len(j.History) != 1 {
		t.Errorf("Get(pay-42) = %+v, %v; want it finished, one attempt", j, err)
	}
}
