package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/api"
)

// Crash test settings. DELAYQ_CRASH_KILLS raises the number of kills for a
// longer soak.
const (
	crashKills      = 24
	crashKillBudget = 45 * time.Second // stop killing after this even if fewer kills
	crashDrain      = 30 * time.Second // longest the final drain may take
	crashProducers  = 6
	crashConsumers  = 6
	crashMaxPuts    = 12_000
)

var crashTopics = []string{"crash-a", "crash-b", "crash-c"}

// TestCrashKill9 runs the real binary, puts, reserves and finishes jobs from
// many goroutines, and kills the process with SIGKILL at random moments,
// restarting it on the same data directory each time. It then drains every
// job and proves, from the ledger of what the server acknowledged: every
// acknowledged put survives and is delivered; nothing is delivered before
// it is due; a finished job never comes back; a reserved job is not handed
// to anyone else before its TTR deadline, across kills too.
//
// It runs in both durability modes: --fsync always (each answer after its
// fsync) and --fsync 50ms (each answer once the write reached the kernel,
// which a kill -9 of the process does not undo).
func TestCrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 crash test skipped in -short mode")
	}
	for _, mode := range []string{"always", "50ms"} {
		t.Run("fsync="+mode, func(t *testing.T) { crashKill9(t, "--fsync", mode) })
	}
}

// crashKill9 is one run of TestCrashKill9 with the serve flags extra.
func crashKill9(t *testing.T, extra ...string) {
	kills := crashKills
	if v, err := strconv.Atoi(os.Getenv("DELAYQ_CRASH_KILLS")); err == nil && v > 0 {
		kills = v
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	t.Cleanup(hc.CloseIdleConnections)
	d := buildDaemon(t)
	d.extra = extra
	d.start(hc)
	l := newLedger()
	w := &workload{t: t, hc: hc, d: d, l: l}

	ctx, stopProducers := context.WithCancel(t.Context())
	consumeCtx, stopConsumers := context.WithCancel(t.Context())
	var producers, consumers sync.WaitGroup
	for i := range crashProducers {
		producers.Go(func() { w.produce(ctx, i) })
	}
	for i := range crashConsumers {
		consumers.Go(func() { w.consume(consumeCtx, i) })
	}

	begin := time.Now()
	restarts := w.killLoop(kills, crashKillBudget)
	stopProducers()
	producers.Wait()
	w.settling.Store(true)
	drained := w.drain(crashDrain)
	stopConsumers()
	consumers.Wait()
	if err := d.stop(); err != nil {
		t.Errorf("graceful stop after the run: %v\nlog:\n%s", err, d.logTail())
	}

	l.checkHistory()
	f := l.figures()
	t.Logf("%d kills in %v; restart to healthy: mean %v, max %v", f.kills, time.Since(begin).Round(time.Millisecond),
		mean(restarts), maxOf(restarts))
	t.Logf("puts: %d sent, %d acknowledged, %d unacknowledged that landed anyway", f.putsSent, f.putsAcked, f.putsUncertainLanded)
	t.Logf("deliveries: %d reservations, %d redeliveries (%d across a kill), %d finishes acknowledged; max first-delivery lateness %v",
		f.reservations, f.redeliveries, f.redeliveredAcrossKill, f.finishesAcked, f.maxLateness)
	t.Logf("reservations stamped before the moment that readied their job (store took Now before its lock): %d, at most %v early",
		f.staleStamps, f.maxStale)
	if f.kills < min(kills, 20) {
		t.Errorf("only %d kills in %v, want at least %d", f.kills, crashKillBudget, min(kills, 20))
	}
	if !drained {
		t.Errorf("server not empty %v after the last restart", crashDrain)
	}
	for i, v := range l.violations {
		if i == 20 {
			t.Errorf("... and %d more violations", len(l.violations)-20)
			break
		}
		t.Error(v)
	}
}

// workload is the crash test's clients.
type workload struct {
	t        *testing.T
	hc       *http.Client
	d        *daemon
	l        *ledger
	settling atomic.Bool // set once producers stop: consumers finish everything
}

// produce puts jobs with unique ids until ctx ends: 40% ready at once, the
// rest delayed 0-2 s, TTR 2-3 s.
func (w *workload) produce(ctx context.Context, g int) {
	for n := 0; ctx.Err() == nil && n < crashMaxPuts/crashProducers; n++ {
		id := fmt.Sprintf("p%d-%d", g, n)
		topic := crashTopics[rand.IntN(len(crashTopics))]
		var delay time.Duration
		if rand.IntN(10) >= 4 {
			delay = time.Duration(rand.IntN(2000)) * time.Millisecond
		}
		body := id
		in := api.PutRequest{ID: id, Body: &body, Delay: ptrTo(api.Duration(delay)),
			TTR: ptrTo(api.Duration(time.Duration(2000+rand.IntN(1001)) * time.Millisecond))}
		w.l.putSent(id, topic, delay)
		var out api.PutResponse
		if _, err := call(ctx, w.hc, "POST", w.d.url()+"/v1/topics/"+url.PathEscape(topic)+"/jobs", in, &out); err == nil {
			w.l.putAcked(id)
		} else {
			sleepCtx(ctx, 20*time.Millisecond) // the server is probably down
		}
		sleepCtx(ctx, time.Duration(rand.IntN(8))*time.Millisecond)
	}
}

// consume reserves batches, checks each job against the ledger, and
// finishes it (one by one, or the whole reserve in one batch finish),
// except 10% it abandons (while the kills go on) so TTR expiry hands them
// out again.
func (w *workload) consume(ctx context.Context, c int) {
	for ctx.Err() == nil {
		in := api.ReserveRequest{Topics: crashTopics, N: 1 + rand.IntN(5), Wait: ptrTo(api.Duration(500 * time.Millisecond))}
		var out api.JobsResponse
		if _, err := call(ctx, w.hc, "POST", w.d.url()+"/v1/reserve", in, &out); err != nil {
			sleepCtx(ctx, 20*time.Millisecond)
			continue
		}
		recv := time.Now()
		if c%2 == 1 { // half the consumers finish a reserve's jobs in one batch
			w.handleBatch(ctx, c, out.Jobs, recv)
			continue
		}
		for _, j := range out.Jobs {
			w.handle(ctx, c, j, recv)
		}
	}
}

// handleBatch records a reserve's jobs and finishes those it does not
// abandon with one batch finish (POST /v1/jobs/finish); each entry the
// server answers ok is an acknowledged finish.
func (w *workload) handleBatch(ctx context.Context, c int, jobs []api.Job, recv time.Time) {
	var in api.FinishBatchRequest
	for _, j := range jobs {
		if !w.reserved(c, j, recv) {
			continue
		}
		w.l.finishSent(j.ID)
		in.Jobs = append(in.Jobs, api.FinishRef{ID: j.ID, Reservation: j.Reservation})
	}
	if len(in.Jobs) == 0 {
		return
	}
	var out api.FinishBatchResponse
	if _, err := call(ctx, w.hc, "POST", w.d.url()+"/v1/jobs/finish", in, &out); err != nil {
		return
	}
	if len(out.Results) != len(in.Jobs) {
		w.l.violate("batch finish of %d jobs answered %d results", len(in.Jobs), len(out.Results))
		return
	}
	for i, r := range out.Results {
		if r.ID != in.Jobs[i].ID {
			w.l.violate("batch finish result %d is for %s, want %s", i, r.ID, in.Jobs[i].ID)
		} else if r.OK {
			w.l.finishAcked(r.ID, in.Jobs[i].Reservation)
		}
	}
}

// reserved records a delivery in the ledger and reports whether the
// consumer should finish it (10% are abandoned while the kills go on, so
// TTR expiry hands them out again).
func (w *workload) reserved(c int, j api.Job, recv time.Time) bool {
	if j.Deadline == nil || j.Reservation == "" {
		w.l.violate("reserved job %s came without reservation or deadline", j.ID)
		return false
	}
	ttr := time.Duration(j.TTR * float64(time.Second))
	w.l.reserved(j.ID, resRec{token: j.Reservation, reservedAt: j.Deadline.Add(-ttr), deadline: j.Deadline.Time,
		due: j.Due.Time, recv: recv, consumer: c})
	return w.settling.Load() || rand.IntN(10) != 0
}

func (w *workload) handle(ctx context.Context, c int, j api.Job, recv time.Time) {
	if !w.reserved(c, j, recv) {
		return // abandoned: comes back after its TTR
	}
	w.l.finishSent(j.ID)
	in := api.ActionRequest{Reservation: j.Reservation}
	if _, err := call(ctx, w.hc, "POST", w.d.url()+"/v1/jobs/"+url.PathEscape(j.ID)+"/finish", in, nil); err == nil {
		w.l.finishAcked(j.ID, j.Reservation)
	}
}

// killLoop kills the server at random moments and restarts it, checking
// after each restart that acknowledged jobs nobody has touched are there.
// It returns the restart times.
func (w *workload) killLoop(kills int, budget time.Duration) []time.Duration {
	var restarts []time.Duration
	deadline := time.Now().Add(budget)
	for i := 0; i < kills && time.Now().Before(deadline); i++ {
		// Mostly mid-load; sometimes right after a restart, while
		// recovery's own writes may be in flight.
		up := time.Duration(300+rand.IntN(1200)) * time.Millisecond
		if rand.IntN(5) == 0 {
			up = time.Duration(rand.IntN(50)) * time.Millisecond
		}
		time.Sleep(up)
		w.l.killed()
		w.d.kill()
		restarts = append(restarts, w.d.start(w.hc))
		w.checkPresent(100)
	}
	return restarts
}

// checkPresent GETs up to n acknowledged jobs no consumer has tried to
// finish; each must exist.
func (w *workload) checkPresent(n int) {
	for _, id := range w.l.untouched(n) {
		_, err := call(w.t.Context(), w.hc, "GET", w.d.url()+"/v1/jobs/"+url.PathEscape(id), nil, nil)
		if err != nil && !w.l.finishTriedBefore(id, time.Now()) {
			w.l.violate("acknowledged put %s missing after restart: %v", id, err)
		}
	}
}

// drain waits until every acknowledged put was delivered and the server
// holds no job, or until limit.
func (w *workload) drain(limit time.Duration) bool {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var out api.TopicsResponse
		if _, err := call(w.t.Context(), w.hc, "GET", w.d.url()+"/v1/topics", nil, &out); err != nil {
			continue
		}
		left := 0
		for _, tp := range out.Topics {
			left += tp.Delayed + tp.Ready + tp.Reserved + tp.Buried
		}
		if left == 0 && w.l.settled() {
			return true
		}
	}
	return false
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return (sum / time.Duration(len(ds))).Round(time.Millisecond)
}

func maxOf(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m.Round(time.Millisecond)
}
