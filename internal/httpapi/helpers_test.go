package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/diskstore"
	"github.com/delayq/delayq/internal/store/memstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testAPI is a handler over a real engine (timer running) on a real store.
type testAPI struct {
	t testing.TB
	e *engine.Engine
	h http.Handler
}

// newAPI serves from the durable diskstore in a temp dir.
func newAPI(t testing.TB, opts Options) *testAPI {
	t.Helper()
	st, err := diskstore.Open(t.TempDir(), diskstore.Options{MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatalf("diskstore.Open: %v", err)
	}
	return startAPI(t, st, opts)
}

// newMemAPI serves from memstore. Use it inside synctest bubbles (memstore
// starts no goroutines; requests go straight to the handler, no sockets)
// and in fuzz targets, where a fsync per put would only slow the search.
func newMemAPI(t testing.TB, opts Options) *testAPI {
	t.Helper()
	return startAPI(t, memstore.New(), opts)
}

func startAPI(t testing.TB, st store.Store, opts Options) *testAPI {
	e := engine.New(st, engine.Config{Logger: discard()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if err := st.Close(); err != nil {
			t.Errorf("closing the store: %v", err)
		}
	})
	if opts.Logger == nil {
		opts.Logger = discard()
	}
	return &testAPI{t: t, e: e, h: NewHandler(e, opts)}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// do sends one request and returns the status and body.
func (a *testAPI) do(method, path, body string) (int, string) {
	a.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	w := httptest.NewRecorder()
	a.h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// must sends a request that must answer want, and decodes the answer into v
// (when v is not nil).
func (a *testAPI) must(want int, method, path, body string, v any) {
	a.t.Helper()
	got, resp := a.do(method, path, body)
	if got != want {
		a.t.Fatalf("%s %s %s = %d %s, want %d", method, path, body, got, resp, want)
	}
	if v != nil {
		reflect.ValueOf(v).Elem().SetZero() // fields the answer omits must not keep old values
		if err := json.Unmarshal([]byte(resp), v); err != nil {
			a.t.Fatalf("%s %s: answer %s: %v", method, path, resp, err)
		}
	}
}

// put puts one job and returns its id.
func (a *testAPI) put(topic, body string) api.PutResponse {
	a.t.Helper()
	var p api.PutResponse
	a.must(http.StatusCreated, "POST", "/v1/topics/"+topic+"/jobs", body, &p)
	return p
}

// reserve reserves up to n jobs of topic without waiting.
func (a *testAPI) reserve(topic string, n int) []api.Job {
	a.t.Helper()
	var r api.JobsResponse
	a.must(http.StatusOK, "POST", "/v1/reserve", `{"topics":["`+topic+`"],"n":`+itoa(n)+`}`, &r)
	return r.Jobs
}

// errorOf decodes an error answer, failing when it is not one.
func errorOf(t *testing.T, body string) api.ErrorBody {
	t.Helper()
	var e api.ErrorResponse
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("answer %s is not an error object (%v)", body, err)
	}
	return e.Error
}

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
