package beanstalk

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/engine"
)

// TestForgetTubes: 500 tubes each given a job over beanstalkd, the jobs
// then finished through the engine (as an HTTP or gRPC consumer would),
// leave the tube registry at the tubes that exist once ForgetTubes runs:
// no connection's command drops them, and they used to stay until someone
// asked list-tubes. A paused tube stays while its pause lasts.
func TestForgetTubes(t *testing.T) {
	ts := startDelayq(t, Limits{})
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const tubes = 500
	var b strings.Builder
	for i := range tubes {
		fmt.Fprintf(&b, "use t%d\r\nput 0 0 60 1\r\nx\r\n", i)
	}
	b.WriteString("use default\r\n")
	nc.SetDeadline(time.Now().Add(time.Minute))
	go nc.Write([]byte(b.String()))
	r := bufio.NewReader(nc)
	for i := 0; i < 2*tubes+1; i++ {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if !strings.HasPrefix(line, "USING") && !strings.HasPrefix(line, "INSERTED") {
			t.Fatalf("reply %d = %q", i, line)
		}
	}
	size := func() int {
		ts.srv.tubes.mu.Lock()
		defer ts.srv.tubes.mu.Unlock()
		return len(ts.srv.tubes.byName)
	}
	if n := size(); n < tubes {
		t.Fatalf("%d tubes known after puts into %d", n, tubes)
	}
	ctx := context.Background()
	for i := range tubes {
		js, err := ts.engine.Reserve(ctx, engine.ReserveRequest{Topics: []string{fmt.Sprintf("t%d", i)}})
		if err != nil || len(js) != 1 {
			t.Fatalf("Reserve(t%d) = %v, %v", i, js, err)
		}
		if _, err := ts.engine.Delete(ctx, delayq.Ref{ID: js[0].ID, Reservation: js[0].Reservation}, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := ts.engine.Pause(ctx, "t0", time.Minute); err != nil {
		t.Fatal(err)
	}
	left, err := ts.srv.ForgetTubes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if left != 2 || size() != 2 { // default, and t0 while paused
		t.Errorf("ForgetTubes() = %d, %d tubes known; want 2 (default, paused t0)", left, size())
	}
}
