package beanstalk

import (
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/engine"
)

// lineBufSize is beanstalkd's LINE_BUF_SIZE: a command line, "\r\n"
// included, must fit in it, or it is discarded up to its end and answered
// BAD_FORMAT.
const lineBufSize = 224

// deadlineMargin is beanstalkd's SAFETY_MARGIN: in the last second of a
// reservation's TTR a reserve answers DEADLINE_SOON instead of waiting.
const deadlineMargin = time.Second

// conn is one client connection. Everything but the fields marked
// otherwise belongs to the connection's goroutine.
type conn struct {
	srv    *Server
	nc     net.Conn
	remote string
	ctx    context.Context
	cancel context.CancelFunc

	buf     [lineBufSize]byte // bytes read but not consumed: beanstalkd's cmd buffer
	n       int               // how many of buf are filled
	readErr error             // sticky read error, seen while a reserve waited
	out     bytes.Buffer      // replies not yet sent; sent whole by flush
	line    [lineBufSize]byte // the command line readLine returned last
	wdl     time.Time         // the write deadline set on nc; flush renews it

	use      string
	watch    []string        // in beanstalkd's order (an ignore moves the last in its place)
	held     map[uint64]held // jobs this connection has reserved, by seq
	unsent   []uint64        // seqs of held jobs whose RESERVED reply is not out yet
	producer bool
	worker   bool
	quit     bool

	admitted  bool            // admit ran
	principal *auth.Principal // who the client is; nil: nobody (see guard.go)
	byName    string          // by's answer, once built
	rateKey   string          // whose request rate the commands count against

	dmu     sync.Mutex
	stopped bool // guarded by dmu: Shutdown asked this connection to stop reading
}

// held is a reservation this connection holds.
type held struct {
	token    string
	deadline time.Time
	// sent: the RESERVED reply was written whole while the client still
	// read. Until then the client has not received the job, and a close
	// gives it back at no cost of an attempt (Engine.GiveBack) instead of
	// releasing it.
	sent bool
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{
		srv:    s,
		nc:     nc,
		remote: nc.RemoteAddr().String(),
		use:    defaultTube,
		watch:  []string{defaultTube},
		held:   make(map[uint64]held),
	}
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	s.tubes.update(defaultTube, func(t *tube) { t.using++; t.watching++ })
	return c
}

// serve reads and runs commands until the client quits, goes away, or is
// too slow, then closes the connection.
func (c *conn) serve() {
	defer c.close()
	for !c.quit {
		line, err := c.readLine()
		switch {
		case err == errBadFormat:
			c.reply(err)
		case err != nil:
			return
		default:
			c.dispatch(line)
		}
		// A client that pipelines commands gets their replies in one
		// write: flush only when no further command is buffered (or the
		// replies grow large), as the reply order is kept either way.
		if lineEnd(c.buf[:c.n]) >= 0 && c.out.Len() < 16<<10 && !c.quit {
			continue
		}
		if err := c.flush(); err != nil {
			return
		}
	}
}

// close ends the connection and gives back what it held: its reserved
// jobs go back to ready (beanstalkd's enqueue_reserved_jobs) and its tube
// references go. A job the client received is released, which counts
// the attempt; one whose RESERVED reply never reached it is given back,
// which does not.
func (c *conn) close() {
	c.nc.Close()
	c.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var unsent []delayq.Ref
	for seq, h := range c.held {
		ref := delayq.Ref{Seq: seq, Reservation: h.token}
		if !h.sent {
			unsent = append(unsent, ref)
			continue
		}
		if _, err := c.srv.Engine.Release(ctx, engine.ReleaseRequest{Ref: ref}); err != nil && h.deadline.After(time.Now()) {
			c.srv.logger().Debug("beanstalk: job held by a closed connection not released; it returns at its TTR", "seq", seq, "err", err)
		}
	}
	if len(unsent) > 0 {
		c.srv.Engine.GiveBack(unsent...)
	}
	c.srv.tubes.mu.Lock()
	c.srv.tubes.get(c.use).using--
	for _, name := range c.watch {
		c.srv.tubes.get(name).watching--
	}
	c.srv.tubes.mu.Unlock()
	c.srv.unref(ctx, c.use)
	for _, name := range c.watch {
		c.srv.unref(ctx, name)
	}
	if c.producer {
		c.srv.stats.producers.Add(-1)
	}
	if c.worker {
		c.srv.stats.workers.Add(-1)
	}
}

// stopReading makes a read that waits for the next command return, so the
// connection closes after the command it is running. Called by Shutdown.
func (c *conn) stopReading() {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	c.stopped = true
	c.nc.SetReadDeadline(time.Now())
}

// setReadDeadline sets the read deadline unless Shutdown stopped reading.
func (c *conn) setReadDeadline(t time.Time) {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if !c.stopped {
		c.nc.SetReadDeadline(t)
	}
}

// lineEnd is beanstalkd's scan_line_end: the first '\r' in the buffer
// (the last byte aside) ends the line if '\n' follows it; otherwise there
// is no line yet, whatever comes later.
func lineEnd(b []byte) int {
	if len(b) < 2 {
		return -1
	}
	i := bytes.IndexByte(b[:len(b)-1], '\r')
	if i < 0 || b[i+1] != '\n' {
		return -1
	}
	return i
}

// readLine returns the next command line without its "\r\n". A line that
// does not fit in lineBufSize is read to its end and refused with
// errBadFormat; other errors mean the connection is done. The line is
// valid until the next call: it is copied into c.line, not allocated
// (nothing keeps a command's line once the command ran).
func (c *conn) readLine() ([]byte, error) {
	discarding := false
	for {
		if i := lineEnd(c.buf[:c.n]); i >= 0 {
			line := c.line[:copy(c.line[:], c.buf[:i])]
			c.consume(i + 2)
			if discarding {
				return nil, errBadFormat
			}
			return line, nil
		}
		if c.n == len(c.buf) {
			c.n = 0
			discarding = true
		}
		if c.srv.limits.IdleTimeout > 0 {
			c.setReadDeadline(c.idleDeadline())
		}
		if err := c.fill(); err != nil {
			return nil, err
		}
	}
}

// fill reads more bytes into the free end of buf.
func (c *conn) fill() error {
	if c.readErr != nil {
		return c.readErr
	}
	k, err := c.nc.Read(c.buf[c.n:])
	c.n += k
	if k > 0 {
		return nil
	}
	return err
}

func (c *conn) consume(k int) {
	c.n = copy(c.buf[:], c.buf[k:c.n])
}

// readBody reads n bytes that follow a command line: first what is
// buffered, then from the socket, within Limits.BodyTimeout. With keep
// false the bytes are thrown away (beanstalkd's bit bucket).
func (c *conn) readBody(n int64, keep bool) ([]byte, error) {
	var out []byte
	if keep {
		out = make([]byte, 0, n)
	}
	k := min(int64(c.n), n)
	if keep {
		out = append(out, c.buf[:k]...)
	}
	c.consume(int(k))
	n -= k
	if n == 0 {
		return out, nil
	}
	if c.readErr != nil {
		return nil, c.readErr
	}
	c.setReadDeadline(time.Now().Add(c.srv.limits.BodyTimeout))
	defer c.setReadDeadline(time.Time{})
	if !keep {
		_, err := io.CopyN(io.Discard, c.nc, n)
		return nil, err
	}
	out = out[:len(out)+int(n)]
	_, err := io.ReadFull(c.nc, out[len(out)-int(n):])
	return out, err
}

// watchHangup reads the socket while a reserve waits, as beanstalkd
// watches a waiting connection for a hang-up: when the client closes (or
// half-closes) it, cancel ends the wait. Bytes that arrive meanwhile are
// kept for the next command. The returned stop must be called before the
// buffer is used again.
func (c *conn) watchHangup(cancel context.CancelFunc) (stop func()) {
	if c.readErr != nil {
		cancel()
		return func() {}
	}
	if c.n == len(c.buf) {
		return func() {}
	}
	var stopping atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c.n < len(c.buf) {
			k, err := c.nc.Read(c.buf[c.n:])
			c.n += k
			if err != nil {
				if !stopping.Load() {
					c.readErr = err
					cancel()
				}
				return
			}
		}
	}()
	return func() {
		stopping.Store(true)
		c.nc.SetReadDeadline(time.Unix(1, 0))
		<-done
		c.setReadDeadline(time.Time{})
	}
}

func (c *conn) writeLine(s string) {
	c.out.WriteString(s)
	c.out.WriteString("\r\n")
}

// writeUintLine writes "<word><n>\r\n" (word ends with its space)
// without building the line as a string first.
func (c *conn) writeUintLine(word string, n uint64) {
	b := append(c.out.AvailableBuffer(), word...)
	b = strconv.AppendUint(b, n, 10)
	c.out.Write(append(b, '\r', '\n'))
}

// writeJob writes "<word> <id> <bytes>\r\n<body>\r\n".
func (c *conn) writeJob(word string, j *delayq.Job) {
	b := append(c.out.AvailableBuffer(), word...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, j.Seq, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(j.Body)), 10)
	c.out.Write(append(b, '\r', '\n'))
	c.out.Write(j.Body)
	c.out.WriteString("\r\n")
}

// writeData writes "OK <bytes>\r\n<data>\r\n", the reply of stats and lists.
func (c *conn) writeData(data []byte) {
	c.writeLine("OK " + strconv.Itoa(len(data)))
	c.out.Write(data)
	c.out.WriteString("\r\n")
}

// flush sends the replies within Limits.WriteTimeout, so a client that
// never reads cannot hold this goroutine.
//
// The deadline is not set anew for every flush: it is set a quarter of
// WriteTimeout further out than needed and renewed only once less than
// WriteTimeout is left, so every write still gets at least WriteTimeout
// (at most 1.25 times that) and a busy connection changes its runtime
// timer a few times a WriteTimeout instead of at every reply.
func (c *conn) flush() error {
	if c.out.Len() == 0 {
		return nil
	}
	now, wt := time.Now(), c.srv.limits.WriteTimeout
	if c.wdl.Sub(now) < wt {
		c.wdl = now.Add(wt + wt/4)
		c.nc.SetWriteDeadline(c.wdl)
	}
	_, err := c.out.WriteTo(c.nc)
	if c.out.Cap() > 64<<10 {
		c.out = bytes.Buffer{} // do not keep a big body's buffer for an idle connection
	}
	if err == nil && c.readErr == nil {
		c.delivered()
	}
	return err
}

// delivered marks the held jobs whose RESERVED replies just went out as
// sent. A reply written after the client's end of stream was seen does
// not count: a client that hung up while its reserve completed never
// reads it, and one that only half-closed loses the job with the
// connection at once anyway.
func (c *conn) delivered() {
	for _, seq := range c.unsent {
		if h, ok := c.held[seq]; ok {
			h.sent = true
			c.held[seq] = h
		}
	}
	c.unsent = c.unsent[:0]
}
