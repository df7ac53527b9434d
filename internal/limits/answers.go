package limits

import (
	"net/http"
	"time"
)

// AnswerOptions configure Answers.
type AnswerOptions struct {
	// Bytes is the budget a request's Charge is opened on; nil charges
	// nothing.
	Bytes *Bytes
	// WriteTimeout is how long one piece of an answer (answerPiece bytes)
	// may wait for the client to take it (--write-timeout): a client that
	// stops reading is cut off after it, and the bytes its answer held go
	// back to the budget. 0: no bound beyond the server's own.
	WriteTimeout time.Duration
}

// answerPiece is what one write deadline covers: a client must take this
// much of an answer within the write timeout, so the slowest reader kept
// is answerPiece per WriteTimeout (2 KiB/s at the defaults).
const answerPiece = 64 << 10

// Answers wraps next, the whole HTTP port (the HTTP API and gRPC), with
// what each request costs while it runs: it marks the request's
// connection busy (Conn.Begin and End, so only idle connections are
// reclaimed), opens the request's Charge on the budget (WithCharge: the
// guards charge the request's body to it, handlers what they build), and
// charges each write of the answer while it is being written (Hold), so
// an answer a client is slow to take counts against the budget like a
// request body. Each piece of a write must be taken within WriteTimeout,
// else the write fails and the server cuts the connection (HTTP/1) or the
// stream (HTTP/2); between writes no deadline runs, so a long-poll that
// has not answered yet is not cut.
func Answers(next http.Handler, o AnswerOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		conn := ConnFrom(ctx)
		conn.Begin()
		defer conn.End()
		c := o.Bytes.Open()
		defer c.Close()
		if c != nil {
			r = r.WithContext(WithCharge(ctx, c))
		}
		aw := &answerWriter{ResponseWriter: w, c: c, timeout: o.WriteTimeout, h2: r.ProtoMajor >= 2}
		if aw.timeout > 0 {
			aw.rc = http.NewResponseController(w)
			// What the server flushes once the handler returns (the
			// last of an HTTP/1 answer) gets its own deadline.
			defer func() { aw.rc.SetWriteDeadline(time.Now().Add(aw.timeout)) }()
		}
		next.ServeHTTP(aw, r)
	})
}

// answerWriter charges and times the writes of one answer.
type answerWriter struct {
	http.ResponseWriter
	c       *Charge
	timeout time.Duration
	rc      *http.ResponseController // nil without a timeout
	h2      bool                     // HTTP/2: a deadline must be cleared after each write
}

func (aw *answerWriter) Write(p []byte) (int, error) {
	// p is in memory until the write returns, however slowly the client
	// reads: it is charged for that long.
	aw.c.Hold(int64(len(p)))
	defer aw.c.Give(int64(len(p)))
	if aw.rc == nil {
		return aw.ResponseWriter.Write(p)
	}
	if aw.h2 {
		// No deadline between writes: for HTTP/2 a deadline is a timer
		// that resets the stream when it fires, writing or not. (An
		// HTTP/1 deadline binds only writes, each of which sets its own.)
		defer aw.rc.SetWriteDeadline(time.Time{})
	}
	n := 0
	for n < len(p) {
		end := min(len(p), n+answerPiece)
		aw.rc.SetWriteDeadline(time.Now().Add(aw.timeout))
		m, err := aw.ResponseWriter.Write(p[n:end])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Flush sends what is buffered, within the write timeout.
func (aw *answerWriter) Flush() {
	if aw.rc == nil {
		if f, ok := aw.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		return
	}
	aw.rc.SetWriteDeadline(time.Now().Add(aw.timeout))
	_ = aw.rc.Flush()
	if aw.h2 {
		aw.rc.SetWriteDeadline(time.Time{})
	}
}

// Unwrap lets http.ResponseController reach the connection through the
// writer.
func (aw *answerWriter) Unwrap() http.ResponseWriter { return aw.ResponseWriter }
