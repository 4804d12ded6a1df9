package engine

import (
	"errors"
	"fmt"
	"os"

	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/wire"
)

// How a client connection ends: the client gone, an abort, a crash in a
// handler, timeouts, and the close that returns the connection's parts to
// the loop.

// gone ends the connection because the client left or broke it.
func (c *lconn) gone(err error) {
	cerr := fmt.Errorf("%w: %w", wire.ErrClientGone, err)
	switch c.state {
	case lsForward:
		c.dropUp(false)
		c.forwarded(0, cerr)
		if c.state != lsClosed {
			c.close()
		}
	case lsSend:
		c.broken = true
		c.sendDone(cerr)
	case lsFile:
		c.fileDone(cerr)
	default:
		c.close()
	}
}

// errAborted ends the exchanges of connections closed before their time
// (a shutdown that ran out of time, Engine.Close).
var errAborted = errors.New("connection closed by the server")

// abort closes the connection now. An exchange in progress is ended
// first, as if the client had gone, so that the pipeline hears of it:
// its attempt is reported (the breaker's admission returned, the
// backend's in-flight count ended) and the request recorded. A tunnel
// ends as when it goes quiet (a WebSocket's sides told it goes away).
func (c *lconn) abort() {
	switch c.state {
	case lsForward, lsSend, lsFile:
		c.gone(errAborted)
	case lsTunnel:
		c.abortTunnel()
	}
	c.close()
}

// endFlow ends the exchange's flow (once: a panic in the flow itself does
// not get it called again).
func (c *lconn) endFlow() {
	c.flowDone = true
	c.flow.Finish()
	c.l.putFlow(c)
}

// takeFlow gives the connection a flow for its exchange: a connection
// holds one only while it has an exchange, so that an idle keep-alive
// connection costs the loop no flow (the pipeline's per-request state).
func (c *lconn) takeFlow() {
	if c.flow != nil {
		return
	}
	l := c.l
	if n := len(l.freeFlows); n > 0 {
		c.flow = l.freeFlows[n-1]
		l.freeFlows[n-1] = nil
		l.freeFlows = l.freeFlows[:n-1]
		return
	}
	c.flow = l.eng.stepper.NewFlow()
}

// putFlow takes back c's flow, its exchange over.
func (l *loop) putFlow(c *lconn) {
	if c.flow == nil {
		return
	}
	if len(l.freeFlows) < maxFreeFlows {
		l.freeFlows = append(l.freeFlows, c.flow)
	}
	c.flow = nil
}

// maxFreeFlows bounds the flows a loop keeps for its next exchanges.
const maxFreeFlows = 4096

// expired acts on the deadlines that have passed.
func (c *lconn) expired() {
	now := c.l.now
	if c.deadline != 0 && now >= c.deadline {
		c.timeout()
	}
	if c.bodyDeadline != 0 && now >= c.bodyDeadline && c.state != lsClosed {
		c.bodyTimeout()
	}
}

// crash closes a connection whose exchange panicked. The pipeline hears
// of it once (Finish returns the attempt's admission and records the
// request) unless it panics again; then the connection is closed.
func (c *lconn) crash() {
	func() {
		defer func() { recover() }()
		if !c.flowDone {
			c.endFlow()
		}
	}()
	defer func() {
		if recover() == nil {
			return
		}
		c.client().abandon(c)
	}()
	c.close()
}

// timeout acts on a passed deadline.
func (c *lconn) timeout() {
	switch c.dkind {
	case dlIdle:
		c.close()
	case dlHead, dlBody:
		if c.state == lsIdle && len(c.rd.buffered()) == 0 {
			c.close()
			return
		}
		c.refuse(httpmsg.NewStatusError(408, "request timeout"), c.state == lsBody)
	case dlConnect:
		c.upFailed(fmt.Errorf("%w: dialing %s: %w", wire.ErrConnect, c.be.Addr, os.ErrDeadlineExceeded), false)
	case dlUpHead:
		c.dropUp(false)
		c.forwarded(0, fmt.Errorf("%w: %s: no response head in time: %w", wire.ErrTimeout, c.be.Addr, os.ErrDeadlineExceeded))
	case dlUpBody:
		c.sendDone(fmt.Errorf("%w: %s: reading response body: %w", wire.ErrTimeout, c.be.Addr, os.ErrDeadlineExceeded))
	case dlWrite:
		c.gone(errors.New("write timeout"))
	case dlTunnel:
		c.endTunnel()
	case dlQueue:
		p, fdWait := c.queued, c.fdWait
		p.unqueue(c)
		if fdWait {
			c.forwarded(0, noFDErr(p, c))
			return
		}
		c.forwarded(0, fmt.Errorf("%w: %s: no connection free within %v", wire.ErrBackendBusy, p.addr, c.tr.Settings.QueueTimeout))
	case dlH2Tick, dlH2Linger:
		c.h2tick()
	case dlHello:
		c.noHello()
	case dlProxy:
		c.proxyRefused()
	case dlBackoff:
		c.act(c.flow.Resume())
	default:
		c.deadline = 0
	}
}

// close releases the connection.
func (c *lconn) close() {
	c.client().close(c)
}

// dropExchange lets go of what an exchange holds when its connection (or
// stream) closes: its backend connection, its place in a lookup's or a
// capped backend's wait, its request body buffer and its file.
func (c *lconn) dropExchange() {
	c.releaseTransform()
	c.releaseSmallBody()
	c.dropUp(false)
	c.resolving = nil
	if c.queued != nil {
		c.queued.unqueue(c)
	}
	c.dropBodies()
	if c.file != nil && c.file.File != nil {
		c.file.File.Release()
		c.file.File = nil
	}
}
