package server

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"

	delayqv1 "github.com/delayq/delayq/api/gen/delayq/v1"
	"github.com/delayq/delayq/internal/engine"
)

// putLarge puts n jobs of size bytes each into topic, straight through
// the engine (the test is about reading them back).
func putLarge(t *testing.T, s *Server, topic string, n, size int) {
	t.Helper()
	body := bytes.Repeat([]byte("x"), size)
	for done := 0; done < n; done += 100 {
		var puts []engine.PutRequest
		for range min(100, n-done) {
			puts = append(puts, engine.PutRequest{Topic: topic, Body: body})
		}
		if _, err := s.Engine().Put(t.Context(), puts); err != nil {
			t.Fatal(err)
		}
	}
}

// answerHeld waits until the budget holds more than min bytes: an
// answer the client is not reading.
func answerHeld(t *testing.T, s *Server, min int64) {
	t.Helper()
	waitBudget(t, 10*time.Second, "the unread answer charged", func() (bool, string) {
		n := s.sec.bytes.InFlight()
		return n > min, fmt.Sprintf("%d bytes in flight", n)
	})
}

// answerReleased waits until the budget holds nothing: the answer cut
// off gave its bytes back.
func answerReleased(t *testing.T, s *Server) {
	t.Helper()
	waitBudget(t, 10*time.Second, "the cut-off answer's bytes given back", func() (bool, string) {
		n := s.sec.bytes.InFlight()
		return n == 0, fmt.Sprintf("%d bytes in flight", n)
	})
}

// Issue 28 item 3, HTTP/1: a client that asks for a list of large jobs
// and never reads the answer holds its bytes on the budget while the
// server waits, and is cut off after --write-timeout, which gives them
// back. (On the old build an answer charged nothing, and the connection
// was kept for --max-wait plus 30 s.)
func TestUnreadListAnswerIsChargedAndCutOff(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.WriteTimeout = 300 * time.Millisecond
	s := startServer(t, cfg, &syncBuffer{})
	putLarge(t, s, "big", 400, 60<<10) // 24 MiB as base64: more than the sockets buffer

	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4 << 10)
	io.WriteString(c, "GET /v1/topics/big/jobs?limit=1000 HTTP/1.1\r\nHost: localhost\r\n\r\n")
	answerHeld(t, s, 1<<20)
	waitUntil(t, "the server closes the connection", func() bool { return s.sec.conns.Open() == 0 })
	answerReleased(t, s)
}

// TestListAnswerStreamsWhole: a list answer written a chunk at a time
// is the same JSON document a reader that keeps up gets whole, with the
// page's next cursor.
func TestListAnswerStreamsWhole(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t), &syncBuffer{})
	putLarge(t, s, "many", 150, 10)
	hc := plainClient(t)
	resp, err := hc.Get(s.URL() + "/v1/topics/many/jobs?limit=100")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	want, err := s.Engine().List(t.Context(), engine.ListRequest{Topic: "many", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `"topic":"many"`); resp.StatusCode != 200 || n != 100 || !strings.Contains(string(b), `"next":"`+want.Next+`"`) {
		t.Fatalf("%d, %d jobs, %q...", resp.StatusCode, n, b[:min(len(b), 200)])
	}
}

// Issue 28 item 3, gRPC: a List call whose client gives the answer no
// flow-control window (its stream window at 0) holds the answer's bytes
// on the budget, and its stream is reset after --write-timeout, which
// gives them back. (On the old build the answer charged nothing and was
// held for --max-wait plus 30 s.)
func TestUnreadGRPCListIsChargedAndCutOff(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.WriteTimeout = 300 * time.Millisecond
	s := startServer(t, cfg, &syncBuffer{})
	putLarge(t, s, "big", 100, 60<<10)

	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "localhost"},
		{":path", "/delayq.v1.DelayQService/List"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	msg, _ := proto.Marshal(&delayqv1.ListRequest{Topic: "big", Limit: 1000})
	frame := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg)))
	if err := fr.WriteData(1, true, append(frame, msg...)); err != nil {
		t.Fatal(err)
	}
	// Read frames (acknowledging nothing and opening no window) until the
	// server resets the stream.
	reset := make(chan http2.ErrCode, 1)
	go func() {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				close(reset)
				return
			}
			if rst, ok := f.(*http2.RSTStreamFrame); ok && rst.StreamID == 1 {
				reset <- rst.ErrCode
				return
			}
		}
	}()
	answerHeld(t, s, 1<<20)
	select {
	case _, ok := <-reset:
		if !ok {
			t.Fatal("the connection ended without the stream being reset")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream was not reset")
	}
	answerReleased(t, s)
}
