package limits

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// ConnOptions bound the connections of a listener (ConnListener).
type ConnOptions struct {
	// Max bounds every open connection together; <= 0: no bound.
	Max int
	// PerClient bounds the connections of one client: one remote address
	// (an IPv6 client by its /64, which one host usually holds whole) and,
	// once a request on a connection names its token, one token. The
	// share is at most half of Max, so no one client can hold every slot.
	// <= 0: no bound per client.
	PerClient int
	// Reclaim lets a newcomer over a bound take the slot of an idle
	// connection, which is closed: for HTTP, whose clients open a new
	// connection when a kept-alive one is gone. Not for beanstalkd, whose
	// idle connections hold their watched tubes and reserved jobs.
	Reclaim bool
	// FirstRequest closes a connection that has not begun a request
	// (Conn.Begin) this long after it was accepted: an HTTP/2 client that
	// sends only its preface otherwise holds its slot until the idle
	// timeout. 0: no bound (a listener whose server never calls Begin).
	FirstRequest time.Duration
	// Refuse may write a last word to a connection refused, within a
	// short write deadline; why says which bound it hit. Nil: just close.
	Refuse func(c net.Conn, why string)
}

// reclaimGrace is how long a connection must have been idle (no request
// running, no byte read) before a newcomer may take its slot: one that is
// sending its next request now is not idle, and closing it would lose
// that request.
const reclaimGrace = time.Second

// ConnListener wraps l so that the connections accepted through it stay
// within o's bounds. A newcomer over a bound first takes the slot of an
// idle connection (with o.Reclaim) (an HTTP keep-alive connection between requests; of
// its own client when its client is at its share, else of the client
// holding the most), which is closed; only when none is idle is it handed
// to o.Refuse (which may write a last word, within a short deadline) and
// closed, instead of waiting in the kernel's backlog where the client
// cannot tell a full server from a dead one.
func ConnListener(l net.Listener, o ConnOptions) *Listener {
	share := o.PerClient
	if o.Max > 0 && (share <= 0 || share > max(1, o.Max/2)) {
		share = max(1, o.Max/2)
	}
	return &Listener{Listener: l, o: o, share: share,
		conns: make(map[*Conn]struct{}), byClient: make(map[string]int), byToken: make(map[string]int)}
}

// Listener is a net.Listener with bounds on open connections, in all and
// per client.
type Listener struct {
	net.Listener
	o     ConnOptions
	share int // the most connections one client may hold; 0: no bound

	mu       sync.Mutex
	conns    map[*Conn]struct{} // every connection open and counted
	byClient map[string]int     // by ClientKey
	byToken  map[string]int     // by the principal its first request named

	reclaimed atomic.Int64
	refused   atomic.Int64
}

// Open is how many accepted connections are still open.
func (l *Listener) Open() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(len(l.conns))
}

// Share is the most connections one client may hold (0: no bound).
func (l *Listener) Share() int { return l.share }

// Reclaimed counts the idle connections closed to give their slot to a
// newcomer; Refused the connections (and requests, Conn.Claim) refused
// because no slot was free.
func (l *Listener) Reclaimed() int64 { return l.reclaimed.Load() }

// Refused counts connections and requests refused for want of a slot.
func (l *Listener) Refused() int64 { return l.refused.Load() }

// Accept returns the next connection within the bounds, refusing the
// ones over them on the way.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &Conn{Conn: nc, l: l, client: ClientKey(nc.RemoteAddr())}
		c.touch()
		victim, why := l.admit(c)
		if victim != nil {
			victim.Close()
		}
		if why != "" {
			if l.o.Refuse != nil {
				// A new socket's send buffer takes a short answer without
				// blocking; the deadline covers a peer that is gone.
				nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
				l.o.Refuse(nc, why)
			}
			nc.Close()
			l.refused.Add(1) // once answered, so a count seen means an answer sent
			continue
		}
		if l.o.FirstRequest > 0 {
			c.first.Store(time.AfterFunc(l.o.FirstRequest, c.noFirstRequest))
		}
		return c, nil
	}
}

// admit counts c in, taking an idle connection's slot when a bound is
// reached (victim, for the caller to close outside the lock), or says why
// c is refused.
func (l *Listener) admit(c *Conn) (victim *Conn, why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.share > 0 && l.byClient[c.client] >= l.share:
		if victim = l.idlest(func(o *Conn) bool { return o.client == c.client }); victim == nil {
			return nil, fmt.Sprintf("this client (%s) holds its share of %d connections", c.client, l.share)
		}
	case l.o.Max > 0 && len(l.conns) >= l.o.Max:
		if victim = l.idlest(nil); victim == nil {
			return nil, fmt.Sprintf("the server holds its most connections (%d)", l.o.Max)
		}
	}
	if victim != nil {
		l.forget(victim)
		l.reclaimed.Add(1)
	}
	l.conns[c] = struct{}{}
	l.byClient[c.client]++
	c.counted = true
	return victim, ""
}

// idlest picks the connection to reclaim among those that match (all
// when match is nil): idle for at least reclaimGrace, of the client (or
// token) holding the most, idle the longest. nil when none is idle, or
// the listener reclaims none. l.mu is held. It walks every connection,
// which happens only when a bound is reached.
func (l *Listener) idlest(match func(*Conn) bool) *Conn {
	if !l.o.Reclaim {
		return nil
	}
	now := time.Now().UnixNano()
	var best *Conn
	bestHeld, bestUsed := 0, int64(0)
	for o := range l.conns {
		if o.active.Load() > 0 || (match != nil && !match(o)) {
			continue
		}
		used := o.used.Load()
		if now-used < int64(reclaimGrace) {
			continue
		}
		held := l.byClient[o.client]
		if o.token != "" {
			held = max(held, l.byToken[o.token])
		}
		if best == nil || held > bestHeld || held == bestHeld && used < bestUsed {
			best, bestHeld, bestUsed = o, held, used
		}
	}
	return best
}

// forget takes c off the books, once. l.mu is held.
func (l *Listener) forget(c *Conn) {
	if !c.counted {
		return
	}
	c.counted = false
	delete(l.conns, c)
	if l.byClient[c.client]--; l.byClient[c.client] <= 0 {
		delete(l.byClient, c.client)
	}
	if c.token != "" {
		if l.byToken[c.token]--; l.byToken[c.token] <= 0 {
			delete(l.byToken, c.token)
		}
	}
}

// ClientKey names the client at addr for the per-client bounds: its IP
// address, or for IPv6 its /64 (a host is usually given a whole /64, and
// could otherwise open each connection from another address of it).
func ClientKey(addr net.Addr) string {
	s := addr.String()
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return s
	}
	ip := ap.Addr().Unmap()
	if ip.Is4() {
		return ip.String()
	}
	p, _ := ip.Prefix(64)
	return p.String()
}

// Conn is a connection accepted through a Listener. The server marks the
// requests it runs on it (Begin, End), so the listener knows which
// connections are idle and which never began one.
type Conn struct {
	net.Conn
	l      *Listener
	client string
	first  atomic.Pointer[time.Timer] // closes the connection if no request begins; nil: no bound

	counted bool   // on the listener's books; guarded by l.mu
	token   string // the principal of its first request that named one; guarded by l.mu

	active  atomic.Int32 // requests running
	started atomic.Bool  // a request has begun
	used    atomic.Int64 // unix nanoseconds of the last byte read or request ended
	once    sync.Once
}

func (c *Conn) touch() { c.used.Store(time.Now().UnixNano()) }

// Read reads, noting that the connection is in use.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.touch()
	}
	return n, err
}

// Close gives the connection's slot back, once, on the first Close.
func (c *Conn) Close() error {
	c.once.Do(func() {
		if t := c.first.Load(); t != nil {
			t.Stop()
		}
		c.l.mu.Lock()
		c.l.forget(c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// Unwrap returns the accepted connection, for code that needs its type
// (a *tls.Conn's state, a TCP connection's options).
func (c *Conn) Unwrap() net.Conn { return c.Conn }

// Begin marks a request begun on c; End marks it done. Safe on nil.
func (c *Conn) Begin() {
	if c == nil {
		return
	}
	c.started.Store(true)
	c.active.Add(1)
	c.touch()
}

// End marks a request done. Safe on nil.
func (c *Conn) End() {
	if c == nil {
		return
	}
	c.touch()
	c.active.Add(-1)
}

// noFirstRequest closes c if no request has begun on it.
func (c *Conn) noFirstRequest() {
	if !c.started.Load() {
		c.Close()
	}
}

// Claim counts c against the share of the principal named token, the
// first time a request on it names one (later requests naming another
// token are not counted again). When the token holds its share already,
// an idle connection of that token is closed to make room; when none is
// idle, Claim refuses with a *delayq.LimitError (503
// too_many_connections) and the caller closes c after answering. Safe on
// nil, and a no-op without a per-client bound.
func (c *Conn) Claim(token string) error {
	if c == nil || token == "" || c.l.share <= 0 {
		return nil
	}
	l := c.l
	l.mu.Lock()
	if c.token != "" || !c.counted {
		l.mu.Unlock()
		return nil
	}
	var victim *Conn
	if l.byToken[token] >= l.share {
		victim = l.idlest(func(o *Conn) bool { return o.token == token && o != c })
		if victim == nil {
			l.mu.Unlock()
			l.refused.Add(1)
			return &delayq.LimitError{Code: api.CodeTooManyConns, Retry: true,
				Reason: fmt.Sprintf("the token %q holds its share of %d connections (--max-conns-per-client); reuse them or retry later", token, l.share)}
		}
		l.forget(victim)
		l.reclaimed.Add(1)
	}
	c.token = token
	l.byToken[token]++
	l.mu.Unlock()
	if victim != nil {
		victim.Close()
	}
	return nil
}

// connKey is the context key of a request's Conn.
type connKey struct{}

// WithConn returns ctx carrying the Conn under nc, if nc is (or wraps,
// as a *tls.Conn does) one accepted through a Listener; for
// http.Server.ConnContext.
func WithConn(ctx context.Context, nc net.Conn) context.Context {
	for nc != nil {
		switch c := nc.(type) {
		case *Conn:
			return context.WithValue(ctx, connKey{}, c)
		case *tls.Conn:
			nc = c.NetConn()
		case interface{ Unwrap() net.Conn }:
			nc = c.Unwrap()
		default:
			return ctx
		}
	}
	return ctx
}

// ConnFrom is the Conn a request came on, or nil.
func ConnFrom(ctx context.Context) *Conn {
	c, _ := ctx.Value(connKey{}).(*Conn)
	return c
}
