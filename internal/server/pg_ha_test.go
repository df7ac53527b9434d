package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/pgtest"
)

// TestPostgresFailoverLosesNoAcknowledgedWrite: a primary with a
// synchronous streaming standby (synchronous_commit on), one delayq on
// the two-host URL with target_session_attrs=read-write, producers
// putting and consumers reserving and finishing, and a deleter. The
// primary is killed with SIGKILL mid-load: /readyz answers 503 while no
// primary takes writes; the standby is promoted and the same delayq
// follows it by itself; then every acknowledged put is there, and no
// acknowledged finish or delete left a live job behind.
func TestPostgresFailoverLosesNoAcknowledgedWrite(t *testing.T) {
	primary := pgtest.Start(t, "synchronous_standby_names = 'standby1'", "synchronous_commit = on")
	standby := primary.StartStandby(t, "standby1")
	primary.WaitSync(t, "standby1")
	url := fmt.Sprintf("postgres://postgres@%s,%s/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		primary.Addr(), standby.Addr())

	cfg := testConfig(t)
	cfg.Postgres, cfg.DataDir = url, ""
	s := New(cfg, nil)
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("Start(--postgres %s) = %v", url, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})

	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var (
		mu                      sync.Mutex
		puts, finishes, deletes []string
		nacked, nfailed         atomic.Int64
		wg                      sync.WaitGroup
	)
	pause := func() {
		if ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond) // no primary: do not spin
		}
	}
	for g := range 4 {
		wg.Add(1)
		go func() { // producers
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				id := fmt.Sprintf("p%d-%d", g, i)
				code, err := call(ctx, hc, "POST", s.URL()+"/v1/topics/ha/jobs", api.PutRequest{ID: id, Body: ptrTo("x")}, nil)
				if err == nil && code == http.StatusCreated {
					mu.Lock()
					puts = append(puts, id)
					mu.Unlock()
					nacked.Add(1)
					continue
				}
				nfailed.Add(1)
				pause()
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() { // consumers: reserve, finish
			defer wg.Done()
			for ctx.Err() == nil {
				var res api.JobsResponse
				code, err := call(ctx, hc, "POST", s.URL()+"/v1/reserve", api.ReserveRequest{Topics: []string{"ha"}, N: 4}, &res)
				if err != nil || code != http.StatusOK {
					pause()
					continue
				}
				for _, j := range res.Jobs {
					code, err := call(ctx, hc, "POST", s.URL()+"/v1/jobs/"+j.ID+"/finish", api.ActionRequest{Reservation: j.Reservation}, nil)
					if err == nil && code == http.StatusOK {
						mu.Lock()
						finishes = append(finishes, j.ID)
						mu.Unlock()
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // a deleter of delayed jobs it put itself
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			id := fmt.Sprintf("d-%d", i)
			code, err := call(ctx, hc, "POST", s.URL()+"/v1/topics/ha-later/jobs", api.PutRequest{ID: id, Body: ptrTo("x"), Delay: ptrTo(api.Duration(time.Hour))}, nil)
			if err != nil || code != http.StatusCreated {
				pause()
				continue
			}
			mu.Lock()
			puts = append(puts, id)
			mu.Unlock()
			code, err = call(ctx, hc, "DELETE", s.URL()+"/v1/jobs/"+id, nil, nil)
			if err == nil && code == http.StatusOK {
				mu.Lock()
				deletes = append(deletes, id)
				mu.Unlock()
			}
		}
	}()

	waitWithin(t, 60*time.Second, "300 puts acknowledged", func() bool { return nacked.Load() >= 300 })
	primary.Kill9() // mid-load
	waitWithin(t, 30*time.Second, "/readyz answering 503 while no primary takes writes", func() bool {
		code, _ := do(t, s, "GET", "/readyz", "")
		return code == http.StatusServiceUnavailable
	})
	standby.Promote(t)
	waitWithin(t, 60*time.Second, "/readyz answering 200 on the promoted standby", func() bool {
		code, _ := do(t, s, "GET", "/readyz", "")
		return code == http.StatusOK
	})
	after := nacked.Load()
	waitWithin(t, 60*time.Second, "puts acknowledged again by the same delayq, on the new primary", func() bool {
		return nacked.Load() >= after+50
	})
	stop()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	state := func(id string) (int, string) {
		var j api.Job
		code, err := call(t.Context(), hc, "GET", s.URL()+"/v1/jobs/"+id, nil, &j)
		if err != nil && code != http.StatusNotFound {
			t.Fatalf("GET %s after the failover = %d %v", id, code, err)
		}
		return code, j.State
	}
	lost := 0
	for _, id := range puts {
		if code, _ := state(id); code == http.StatusNotFound {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged puts lost in the failover", lost, len(puts))
	}
	for _, id := range finishes {
		if _, st := state(id); st != string(delayq.StateFinished) {
			t.Errorf("job %s: finish acknowledged, state after the failover %q, want finished", id, st)
		}
	}
	for _, id := range deletes {
		if code, st := state(id); code != http.StatusNotFound && st != string(delayq.StateDeleted) {
			t.Errorf("job %s: delete acknowledged, after the failover %d %q, want gone", id, code, st)
		}
	}
	t.Logf("%d puts, %d finishes, %d deletes acknowledged; %d calls failed during the failover", len(puts), len(finishes), len(deletes), nfailed.Load())
}
