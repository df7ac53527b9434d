package redisstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/httpapi"
)

// childEnv makes the test binary run one delayq instance instead of the
// tests (see TestMain): engine + HTTP API over this store, on 127.0.0.1:0.
const childEnv = "DELAYQ_REDISSTORE_INSTANCE"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runInstance())
	}
	os.Exit(m.Run())
}

// runInstance serves until killed. It prints "LISTEN host:port" once ready.
func runInstance() int {
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	url := "http://" + l.Addr().String()
	st, err := New(ctx, Options{
		Addrs: strings.Split(os.Getenv(childEnv), ","), Prefix: os.Getenv("DELAYQ_REDISSTORE_PREFIX"),
		LeaseTTL: 600 * time.Millisecond, AdvertiseURL: url, Protocols: []string{"http"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := engine.New(st, engine.Config{Logger: quiet})
	go e.Run(ctx)
	h := httpapi.NewHandler(e, httpapi.Options{Logger: quiet, AdvertiseURL: url, Cluster: st.Instances})
	fmt.Printf("LISTEN %s\n", l.Addr())
	return exitCode(http.Serve(l, h))
}

func exitCode(err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startInstance re-executes the test binary as one delayq instance and
// returns its base URL and process.
func startInstance(t *testing.T, addrs []string, prefix string) (string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(addrs, ","), "DELAYQ_REDISSTORE_PREFIX="+prefix)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start instance: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "LISTEN ")
	if err != nil || !ok {
		t.Fatalf("instance did not start: %q, %v", line, err)
	}
	return "http://" + addr, cmd
}

// failoverLatenessLimit bounds how late any delivery may be, failover
// included.
const failoverLatenessLimit = 2 * time.Second

// delivery is one reserve of a job seen by a consumer.
type delivery struct {
	at       time.Time
	deadline time.Time
	due      time.Time
	finished bool
	via      string // the instance the reserve went through
	outcome  string // what the finish got, for the failure message
}

// Budgets of the failover run. The puts take what they take on a loaded
// machine; the consumers then have drainBudget to finish every
// acknowledged job (the last due is 1.5 s after the last put, a TTR
// expiry adds 1 s). Both are far above an unloaded run (about 3 s).
const (
	putBudget   = 90 * time.Second
	drainBudget = 30 * time.Second
)

// TestFailoverKill9 runs three delayq processes on one Redis, puts jobs
// through all of them, consumes through all of them, and kill -9s one
// mid-run. Every acknowledged job must be delivered and finished, none
// before its due time, and none held by two consumers within its TTR.
func TestFailoverKill9(t *testing.T) {
	eachRedis(t, testFailover)
}

func testFailover(t *testing.T, addrs []string) {
	const jobs = 300
	prefix := "t" + nonce()
	var urls []string
	var cmds []*exec.Cmd
	for range 3 {
		u, c := startInstance(t, addrs, prefix)
		urls, cmds = append(urls, u), append(cmds, c)
	}
	// The consumers' deadline starts when the puts end, so a slow put
	// phase on a loaded machine does not eat the time to drain.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	putCtx, putCancel := context.WithTimeout(ctx, putBudget)
	defer putCancel()
	f := &fleet{urls: urls, dead: map[string]bool{}, acked: map[string]bool{}, finished: map[string]bool{}, seen: map[string][]delivery{}}

	var wg sync.WaitGroup
	for c := range 6 {
		wg.Add(1)
		go func() { defer wg.Done(); f.consume(ctx, c) }()
	}
	for i := range jobs {
		switch i {
		case jobs / 2:
			cmds[2].Process.Kill() // kill -9 mid-run
			f.kill(urls[2])
		case jobs * 3 / 4:
			u, _ := startInstance(t, addrs, prefix) // and later a restart
			f.add(u)
		}
		f.put(putCtx, i)
	}
	f.mu.Lock()
	f.putsOver = true
	f.mu.Unlock()
	stop := time.AfterFunc(drainBudget, cancel)
	defer stop.Stop()
	wg.Wait()
	f.check(t, jobs)
}

// fleet is the clients' view of the instances.
type fleet struct {
	urls []string

	mu       sync.Mutex
	dead     map[string]bool       // guarded by mu
	acked    map[string]bool       // guarded by mu: puts answered 201
	finished map[string]bool       // guarded by mu: jobs known finished
	seen     map[string][]delivery // guarded by mu
	putsOver bool                  // guarded by mu
}

func (f *fleet) add(url string) {
	f.mu.Lock()
	f.urls = append(f.urls, url)
	f.mu.Unlock()
}

func (f *fleet) kill(url string) {
	f.mu.Lock()
	f.dead[url] = true
	f.mu.Unlock()
}

// pick returns the i-th live instance (clients fail over to the others).
func (f *fleet) pick(i int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var live []string
	for _, u := range f.urls {
		if !f.dead[u] {
			live = append(live, u)
		}
	}
	return live[i%len(live)]
}

// drained reports whether the puts are over and every acknowledged job is
// finished: the consumers' cue to stop.
func (f *fleet) drained() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.putsOver {
		return false
	}
	for id := range f.acked {
		if !f.finished[id] {
			return false
		}
	}
	return true
}

func post(ctx context.Context, url string, body any, out any) (int, error) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode, nil
}

// put puts job i with a delay of 0 to 1.5 s through an instance; a put
// that got no 201 is not acknowledged and owes nothing.
func (f *fleet) put(ctx context.Context, i int) {
	id := fmt.Sprintf("job-%d", i)
	body := map[string]any{"id": id, "body": "x", "delay": fmt.Sprintf("%dms", (i*37)%1500), "ttr": "1s"}
	code, err := post(ctx, f.pick(i)+"/v1/topics/failover/jobs", body, nil)
	if err == nil && code == http.StatusCreated {
		f.mu.Lock()
		f.acked[id] = true
		f.mu.Unlock()
	}
	time.Sleep(3 * time.Millisecond)
}

// consume reserves through instance c (failing over when it dies) and
// finishes what it gets, except every 7th delivery, which it abandons so
// its TTR runs out and another consumer gets it.
func (f *fleet) consume(ctx context.Context, c int) {
	for n := 0; ctx.Err() == nil && !f.drained(); n++ {
		var res api.JobsResponse
		base := f.pick(c + n)
		code, err := post(ctx, base+"/v1/reserve", map[string]any{"topics": []string{"failover"}, "n": 3, "wait": "500ms"}, &res)
		if err != nil || code != http.StatusOK {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		for k, j := range res.Jobs {
			f.handle(ctx, base, j, (n+k)%7 != 3)
		}
	}
}

func (f *fleet) handle(ctx context.Context, base string, j api.Job, finish bool) {
	d := delivery{at: time.Now(), due: j.Due.Time, via: base, outcome: "abandoned"}
	if j.Deadline != nil {
		d.deadline = j.Deadline.Time
	}
	if finish {
		d.finished, d.outcome = f.finish(ctx, base, j)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen[j.ID] = append(f.seen[j.ID], d)
	if d.finished {
		f.finished[j.ID] = true
	}
}

// finish finishes j through base. When the answer is lost (base was
// killed with the request in flight, which may or may not have reached
// Redis), it does what a failing-over client does: it sends the same
// finish, same reservation, through the other instances until one
// answers. 404 then means the job is gone, and in this test only a finish
// removes a job: the lost request did finish it. 409 means the
// reservation had lapsed, so the job is, or will be, delivered again.
func (f *fleet) finish(ctx context.Context, base string, j api.Job) (bool, string) {
	req := map[string]any{"reservation": j.Reservation}
	code, err := post(ctx, base+"/v1/jobs/"+j.ID+"/finish", req, nil)
	if err == nil {
		return code < 300, fmt.Sprint(code)
	}
	lost := err.Error()
	for i := 0; ctx.Err() == nil; i++ {
		retry := f.pick(i)
		code, err := post(ctx, retry+"/v1/jobs/"+j.ID+"/finish", req, nil)
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		outcome := fmt.Sprintf("reply lost (%s); retry through %s answered %d", lost, retry, code)
		return code < 300 || code == http.StatusNotFound, outcome
	}
	return false, "reply lost (" + lost + "); no retry answered"
}

func (f *fleet) check(t *testing.T, jobs int) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.acked) < jobs*2/3 {
		t.Errorf("only %d of %d puts acknowledged", len(f.acked), jobs)
	}
	var live string // any live instance, for lookups
	for _, u := range f.urls {
		if !f.dead[u] {
			live = u
		}
	}
	redelivered := 0
	var worst time.Duration
	var worstID string
	for id := range f.acked {
		ds := f.seen[id]
		for _, d := range ds {
			if late := d.at.Sub(d.due); late > worst {
				worst, worstID = late, id
			}
		}
		if !f.finished[id] {
			t.Errorf("acknowledged job %s was never delivered and finished; deliveries: %s; now: %s", id, describeDeliveries(ds), lookup(live, id))
		}
		redelivered += max(len(ds)-1, 0)
	}
	for id, ds := range f.seen {
		slices.SortFunc(ds, func(a, b delivery) int { return a.at.Compare(b.at) })
		for i, d := range ds {
			if d.at.Before(d.due) {
				t.Errorf("job %s delivered at %s, before its due %s", id, d.at, d.due)
			}
			if i > 0 && d.at.Before(ds[i-1].deadline) {
				t.Errorf("job %s delivered again at %s, within the previous holder's TTR (deadline %s)", id, d.at, ds[i-1].deadline)
			}
		}
	}
	// A dead instance's buckets pass on within its lease (600 ms here); the
	// rest of the bound is the consumers' long-poll turn-around on a
	// loaded 2-core machine.
	if limit := failoverLatenessLimit; worst > limit {
		t.Errorf("worst delivery lateness %s, want within %s (lease 600ms + consumer turn-around); job %s: %s",
			worst, limit, worstID, describeDeliveries(f.seen[worstID]))
	}
	t.Logf("%d acknowledged, %d finished, %d redeliveries after TTR expiry; worst lateness %s", len(f.acked), len(f.finished), redelivered, worst)
}

func describeDeliveries(ds []delivery) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "[at %s via %s, due %s, deadline %s: %s] ", d.at.Format(time.StampMilli), d.via,
			d.due.Format(time.StampMilli), d.deadline.Format(time.StampMilli), d.outcome)
	}
	return b.String()
}

// lookup reads a job's state through instance base, to tell a job that is
// gone from one that is stuck.
func lookup(base, id string) string {
	req, _ := http.NewRequest("GET", base+"/v1/jobs/"+id, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(b))
}
