package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store/diskstore"
	"github.com/delayq/delayq/internal/store/storetest"
)

// TestHungUpReserveCostsNoAttempt: a consumer whose long-poll (v1 reserve,
// or the original protocol's pop) is abandoned over a real socket just
// after the store reserved a max_attempts=1 job leaves that job ready with
// no attempt spent, and the next consumer gets it. It was released
// instead, which spent the only attempt and buried the job.
func TestHungUpReserveCostsNoAttempt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, path, body string }{
		{"reserve", "/v1/reserve", `{"topics":["t"],"wait":"5m"}`},
		{"pop", "/v1/command", `{"command":"pop","topic":"t","timeout":300}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, err := diskstore.Open(t.TempDir(), diskstore.Options{MemTableSize: 4 << 20, CacheSize: 8 << 20})
			if err != nil {
				t.Fatal(err)
			}
			gate := storetest.NewHangUpGate(st)
			gate.Armed.Store(true)
			a := startAPI(t, gate, Options{})
			srv := httptest.NewServer(a.h)
			defer srv.Close()

			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() {
				req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+tc.path, strings.NewReader(tc.body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
					err = errors.New("the gone client got an answer: " + resp.Status)
				}
				errc <- err
			}()
			waitFor(t, func() bool { return a.e.Waiting("t") == 1 })
			a.put("t", `{"id":"a","max_attempts":1}`)
			select {
			case <-gate.Reserved:
			case <-time.After(5 * time.Second):
				t.Fatal("the waiting reserve did not reserve the job put meanwhile")
			}
			cancel() // the client hangs up; the store has reserved its job
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Errorf("client error = %v, want canceled", err)
			}
			var j *delayq.Job
			waitFor(t, func() bool {
				j, err = a.e.Get(context.Background(), delayq.Ref{ID: "a"})
				return err != nil || j.State != delayq.StateReserved
			})
			if err != nil || j.State != delayq.StateReady || j.Attempts != 0 || j.Releases != 0 || j.Buries != 0 {
				t.Fatalf("job after its consumer hung up = %+v, %v; want ready with attempts 0, no release, no bury", j, err)
			}
			jobs := a.reserve("t", 1)
			if len(jobs) != 1 || jobs[0].ID != "a" || jobs[0].Attempts != 1 {
				t.Fatalf("next consumer's reserve = %+v, want job a on its first attempt", jobs)
			}
		})
	}
}
