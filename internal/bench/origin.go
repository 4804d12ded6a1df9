package bench

import (
	"net"
	"time"
)

// DelayListener wraps a listener so that every read that returns request
// bytes is held back by Delay before the server sees them. Behind it the
// built-in backend answers each request Delay late without any change to
// its code: `helios bench origin` uses it for the slow backend of the
// slow-backend scenario. A zero Delay passes reads through.
type DelayListener struct {
	net.Listener
	Delay time.Duration
}

// Accept returns the next connection, wrapped.
func (l DelayListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil || l.Delay <= 0 {
		return c, err
	}
	return &delayConn{Conn: c, delay: l.Delay}, nil
}

type delayConn struct {
	net.Conn
	delay time.Duration
}

// Read waits Delay after data arrives, so the request is seen late; a
// connection's requests are answered in order, so each is delayed once.
func (c *delayConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		time.Sleep(c.delay)
	}
	return n, err
}
