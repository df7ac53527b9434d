package server

import (
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
)

// sniffListener serves TLS and plain TCP on one port: a connection whose
// first byte is a TLS handshake record (0x16) is served as TLS, any other
// as plain. beanstalkd commands are ASCII words, so the two never mix up.
// This keeps one beanstalkd port for clients with certificates and for
// local clients that cannot do TLS (admitBeanstalk decides what each may
// do).
type sniffListener struct {
	net.Listener
	cfg *tls.Config
}

func (l *sniffListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: c, cfg: l.cfg}, nil
}

// tlsRecordHandshake is the first byte of every TLS ClientHello.
const tlsRecordHandshake = 0x16

// sniffConn decides on its first Read whether it is TLS. Until then (and
// for plain connections after) it is the accepted connection itself.
type sniffConn struct {
	net.Conn
	cfg *tls.Config

	once    sync.Once
	tls     atomic.Pointer[tls.Conn] // set by the first Read when the peer speaks TLS (Close may race it)
	peeked  []byte                   // the byte read to decide, for a plain connection
	readErr error
}

func (c *sniffConn) decide() {
	c.once.Do(func() {
		var b [1]byte
		n, err := c.Conn.Read(b[:])
		if n == 0 {
			c.readErr = err
			return
		}
		if b[0] == tlsRecordHandshake {
			c.tls.Store(tls.Server(&prefixConn{Conn: c.Conn, prefix: b[:1]}, c.cfg))
			return
		}
		c.peeked = b[:1]
	})
}

func (c *sniffConn) Read(p []byte) (int, error) {
	c.decide()
	switch {
	case c.readErr != nil:
		return 0, c.readErr
	case c.tls.Load() != nil:
		return c.tls.Load().Read(p)
	case len(c.peeked) > 0 && len(p) > 0:
		n := copy(p, c.peeked)
		c.peeked = c.peeked[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

func (c *sniffConn) Write(p []byte) (int, error) {
	if t := c.tls.Load(); t != nil {
		return t.Write(p)
	}
	return c.Conn.Write(p)
}

func (c *sniffConn) Close() error {
	if t := c.tls.Load(); t != nil {
		return t.Close()
	}
	return c.Conn.Close()
}

// TLS returns the TLS connection, or nil for a plain one (or before the
// first Read).
func (c *sniffConn) TLS() *tls.Conn { return c.tls.Load() }

// prefixConn replays bytes already read before reading on.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
