package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// daemon is the real delayq binary run as a child process on one data
// directory, killed with SIGKILL and restarted by the crash test.
type daemon struct {
	t    *testing.T
	bin  string
	dir  string
	logs *os.File
	cmd  *exec.Cmd
	// exited closes when cmd.Wait returns; exitErr is its result then.
	exited  chan struct{}
	exitErr error
	base    atomic.Pointer[string] // http://127.0.0.1:port of the running process
	extra   []string               // more serve flags
}

// buildDaemon compiles cmd/delayq into a temp dir (without -race: the
// child is the system under test, not the race detector's subject).
func buildDaemon(t *testing.T) *daemon {
	t.Helper()
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "delayq")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/delayq/delayq/cmd/delayq").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/delayq: %v\n%s", err, out)
	}
	logs, err := os.Create(filepath.Join(tmp, "delayq.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logs.Close() })
	d := &daemon{t: t, bin: bin, dir: filepath.Join(tmp, "data"), logs: logs}
	d.base.Store(ptrTo(""))
	return d
}

func ptrTo[T any](v T) *T { return &v }

// url is the base URL of the current process.
func (d *daemon) url() string { return *d.base.Load() }

// start runs the binary on a free port and waits until it answers
// /healthz. Another test may take the port while the process is down, so
// each restart picks a fresh one.
func (d *daemon) start(hc *http.Client) time.Duration {
	d.t.Helper()
	begin := time.Now()
	for try := 0; ; try++ {
		addr := freeAddr(d.t)
		args := append([]string{"serve", "--http-addr", addr, "--beanstalk-addr", "", "--data-dir", d.dir, "--log-level", "warn"}, d.extra...)
		d.cmd = exec.Command(d.bin, args...)
		d.cmd.Stdout, d.cmd.Stderr = d.logs, d.logs
		if err := d.cmd.Start(); err != nil {
			d.t.Fatalf("starting delayq: %v", err)
		}
		cmd, exited := d.cmd, make(chan struct{})
		d.exited = exited
		go func() { d.exitErr = cmd.Wait(); close(exited) }()
		if waitHealthy(hc, "http://"+addr, exited) {
			d.base.Store(ptrTo("http://" + addr))
			return time.Since(begin)
		}
		d.kill()
		if try == 3 {
			d.t.Fatalf("delayq did not become healthy in 4 tries; log:\n%s", d.logTail())
		}
	}
}

// kill sends SIGKILL and reaps the process.
func (d *daemon) kill() {
	d.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		d.t.Fatalf("kill -9: %v", err)
	}
	<-d.exited
}

// stop sends SIGTERM and returns the exit error of a graceful shutdown.
func (d *daemon) stop() error {
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-d.exited:
		return d.exitErr
	case <-time.After(15 * time.Second):
		d.kill()
		return errors.New("no exit 15s after SIGTERM")
	}
}

func (d *daemon) logTail() string {
	b, _ := os.ReadFile(d.logs.Name())
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitHealthy(hc *http.Client, base string, exited <-chan struct{}) bool {
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		select {
		case <-exited:
			return false
		case <-time.After(5 * time.Millisecond):
		}
		if res, err := hc.Get(base + "/healthz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return true
			}
		}
	}
	return false
}

// call sends one JSON request and decodes a 2xx answer into out. It
// returns the status (0 when no answer came back: the process died).
func call(ctx context.Context, hc *http.Client, method, url string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, err // the answer was cut off: not acknowledged
	}
	if res.StatusCode/100 != 2 {
		return res.StatusCode, fmt.Errorf("%s %s: %d %s", method, url, res.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return 0, fmt.Errorf("%s %s: decoding %q: %w", method, url, b, err)
		}
	}
	return res.StatusCode, nil
}
