package engine

import (
	"fmt"
	"io"
	"os"

	"github.com/helios-lb/helios/internal/bodybuf"
	"github.com/helios-lb/helios/internal/wire"
)

// Response buffering.
//
// An answer streams from its backend to its client with backpressure: what
// the client has not taken waits, up to the listener's output limit, and
// past it the loop stops reading from the backend, which then waits with
// its connection. For a client that cannot take the answer as fast as the
// backend sends it, a route with response buffering (Flow.ResponseBuffer)
// does otherwise: the rest of the answer is read from the backend into a
// spool (bodybuf.Spool: memory, then an unlinked temporary file written by
// the engine's spill goroutine, since a loop must not wait on a disk), the
// backend connection goes back to its pool as soon as the whole answer is
// in, and the client is served from the spool, in order, as fast as it
// reads. While the spool holds anything, every byte of the answer goes
// through it; once the client has caught up with a backend still sending,
// the answer streams directly again.
//
// A fast client never starts one: the spool starts only where the answer
// would have waited. Nor do answers that must not be held back or that
// would gain nothing: upgrades (tunnels), answers that say they are
// streams (text/event-stream, application/grpc, X-Accel-Buffering: no;
// response.streams), answers from HTTP/2 backends (a slow client holds a
// stream of a shared connection there, not a connection), answers whose
// request body still streams, and answers of known length larger than the
// caps, which could not let the backend go. An answer of unknown length
// (chunked, or until the backend closes) is taken as far as the caps
// allow. When a cap (the answer's, or the process's Budget) or the disk
// stops the spool, the answer goes on as without it: the backend waits
// until the client has emptied the spool.

// respSpool is an answer being buffered for its client (lconn.rs).
type respSpool struct {
	bodybuf.Spool
	// done: the whole answer is in (or the backend failed, err); the
	// backend connection has been let go. trailer is the answer's
	// trailer section (chunked).
	done    bool
	err     error
	trailer trailerSection
	// budget counts what the spool did.
	budget *bodybuf.Budget
	// pumping guards spoolPump against re-entry (an HTTP/2 stream's
	// OnWritable from within its own write).
	pumping bool
	// stage gathers what goes to the file while the backend has more
	// to give (one write for all of it, handed to the spill goroutine
	// when the backend has nothing more now, or the stage is full), f is
	// the file to append it to; inflight: a write is under way, and the
	// backend is not read until it is done.
	stage    *[]byte
	f        *os.File
	inflight bool
	// abandoned: its exchange ended while a file write was under way;
	// the write's end closes it.
	abandoned bool
}

// spoolGrow is how much more file room an answer of unknown length
// reserves from the budget at a time.
const spoolGrow = 1 << 20

// startSpool starts buffering the answer for a client that has fallen
// behind, when the route allows it and the answer is one to buffer; it
// reports whether the spool took the answer over (pump then returns).
func (c *lconn) startSpool() bool {
	u := c.up
	if c.rs != nil || u == nil || u.h2 != nil || u.resp.Streams || c.streaming || u.busy() || u.body.done {
		return false
	}
	rb := c.flow.ResponseBuffer()
	if rb == nil {
		return false
	}
	want := int64(-1)
	if u.body.kind == bodyFixed {
		want = u.body.remaining
	}
	// Asked again at each of the backend's events while the answer does
	// not fit: nothing is allocated until it does.
	var sp bodybuf.Spool
	if !sp.Start(rb.Memory, rb.File, rb.Budget, want) {
		if !c.spoolFull {
			c.spoolFull = true
			rb.Budget.CountFull()
		}
		return false
	}
	if !c.spooled {
		c.spooled = true
		rb.Budget.CountBuffered()
	}
	c.rs = &respSpool{Spool: sp, budget: rb.Budget}
	return c.spoolPump()
}

// Where spoolOut left the client.
const (
	outBlocked = iota // it has to be waited for
	outEmpty          // it can take more; the spool has nothing now
	outEnded          // the exchange ended
)

// spoolPump serves a buffered answer: the client takes the spool's front
// as fast as it reads, the backend fills its back as fast as it sends. It
// reports false when the spool has been let go (the client caught up) and
// the answer streams directly again.
func (c *lconn) spoolPump() bool {
	rs := c.rs
	if rs.pumping {
		return true
	}
	rs.pumping = true
	defer func() { rs.pumping = false }()
	for {
		out := c.spoolOut()
		if out == outEnded {
			return true
		}
		if out == outEmpty && c.up != nil && !rs.inflight {
			// The client has caught up with the backend.
			c.dropSpool()
			return false
		}
		if c.up == nil || rs.inflight || !c.spoolIn() {
			// Send what there is while the spool waits.
			if !c.client().flush(c) {
				return true
			}
			c.spoolWait(out)
			return true
		}
	}
}

// spoolWait arms what bounds the wait a buffered answer is left in: the
// client's write timeout while it is the one to be waited for (kept, not
// restarted, by the backend's events meanwhile), else the backend's read
// timeout while it is attached; a disk write bounds itself.
func (c *lconn) spoolWait(out int) {
	switch {
	case out == outBlocked:
		c.client().waitWritable(c)
	case c.up != nil && !c.rs.inflight:
		c.setDeadline(dlUpBody, c.tr.Settings.ReadTimeout)
	default:
		c.deadline, c.dkind = 0, dlNone
	}
}

// spoolOut moves what the spool holds to the client until the client has
// to be waited for or the spool has nothing now, and ends the exchange at
// the end of a whole answer.
func (c *lconn) spoolOut() int {
	rs := c.rs
	for {
		room, canEnd, err := c.client().room(c)
		if err != nil {
			c.sendDone(err)
			return outEnded
		}
		if rs.done && rs.Len() == 0 && canEnd {
			c.spoolEnd()
			return outEnded
		}
		if room <= 0 {
			return outBlocked
		}
		buf := c.l.scratch()
		p, err := rs.Front(buf[:min(room, len(buf))])
		if err != nil {
			c.sendDone(fmt.Errorf("reading the buffered answer: %w", err))
			return outEnded
		}
		if len(p) == 0 {
			return outEmpty
		}
		p = p[:min(len(p), room)]
		n := len(p)
		// The spool holds the answer as the backend sent it; its
		// transform (transform.go) comes on the way out.
		if p, err = c.spoolPiece(p); err != nil {
			c.sendDone(err)
			return outEnded
		}
		// Advance before writing: a write that finds the client gone
		// ends the exchange and lets the spool go.
		rs.Advance(n)
		if len(p) > 0 && !c.client().writePiece(c, p) {
			return outEnded
		}
	}
}

// spoolEnd ends a buffered answer whose bytes have all gone to the client.
func (c *lconn) spoolEnd() {
	rs := c.rs
	if rs.err == nil && !c.spoolTransformEnd() {
		return
	}
	switch {
	case rs.err != nil:
		c.sendDone(rs.err)
	default:
		c.client().endBody(c, &rs.trailer)
	}
}

// spoolIn reads the answer from the backend into the spool until the
// backend has nothing more now, the answer is all in (and the backend let
// go), the spool is full, or a write to its file is under way. It reports
// whether it took anything.
func (c *lconn) spoolIn() bool {
	rs := c.rs
	took := false
	defer c.spoolFlush()
	for u := c.up; u != nil && !rs.inflight; {
		if u.body.done {
			c.spoolDone(nil)
			return true
		}
		// A piece is at most a read straight into the scratch buffer, or
		// what the backend's read buffer holds; the spool must take it
		// whole.
		need := int64(max(spillSize, len(u.rd.buf)))
		if u.body.kind == bodyFixed {
			need = min(need, u.body.remaining)
		}
		if !c.spoolRoom(need) {
			if rs.stage != nil {
				return took // the stage goes to the file first
			}
			if !c.spoolFull {
				c.spoolFull = true
				rs.budget.CountFull()
			}
			return took
		}
		p, err := c.l.bodyPiece(&u.body, spillSize)
		if len(p) > 0 {
			took = true
			if n := rs.PutMem(p); n < len(p) {
				c.spoolStage(p[n:])
			}
		}
		switch {
		case err == nil:
		case err == io.EOF:
			c.spoolDone(nil)
			return true
		case err == errWouldBlock:
			return took
		default:
			c.spoolDone(fmt.Errorf("%w: reading response body: %w", wire.ErrBackend, err))
			return true
		}
	}
	return took
}

// spoolChunk is the most one write to a spool's file takes: what the
// backend has sent while the last write was under way, gathered in one.
const spoolChunk = 128 << 10

// spoolRoom reports whether the spool takes a piece of need bytes now:
// in memory, or in its stage for the file (reserving more of the budget
// for an answer of unknown length when it must).
func (c *lconn) spoolRoom(need int64) bool {
	rs := c.rs
	room := func() int64 {
		file := rs.FileRoom()
		if rs.stage != nil {
			file = min(file, int64(cap(*rs.stage)-len(*rs.stage)))
		}
		return int64(rs.MemRoom()) + file
	}
	if room() >= need {
		return true
	}
	if rs.stage != nil && int64(cap(*rs.stage)-len(*rs.stage)) < need {
		return false // the stage is full
	}
	rs.Grow(max(need, spoolGrow))
	return room() >= need
}

// spoolStage adds p, which memory could not take, to what goes to the
// file next.
func (c *lconn) spoolStage(p []byte) {
	rs := c.rs
	if rs.stage == nil {
		rs.stage = c.l.eng.spoolBufs.Get().(*[]byte)
	}
	*rs.stage = append(*rs.stage, p...)
	rs.f = rs.BeginFile(len(p))
}

// spoolFlush hands what the stage gathered to the spill goroutine; the
// spool takes nothing more from the backend until it is written
// (spoolWritten).
func (c *lconn) spoolFlush() {
	rs := c.rs
	if rs == nil || rs.stage == nil || rs.inflight {
		return
	}
	rs.inflight = true
	j := spillJob{c: c, data: rs.stage, n: len(*rs.stage), out: rs, f: rs.f}
	rs.stage = nil
	select {
	case c.l.eng.spills <- j:
	default:
		// The spill goroutine is behind: the loop does not wait for
		// it; its sweeps hand the write over when there is room.
		c.l.spillLater = append(c.l.spillLater, j)
	}
}

// spoolDone records that the backend's answer has ended (err: how it
// failed) and lets the backend connection go: back to its pool when it
// can carry another request.
func (c *lconn) spoolDone(err error) {
	rs := c.rs
	rs.done, rs.err = true, err
	if err == nil {
		rs.trailer.copyFrom(c.up.respTrailer())
	}
	c.letGoUp(err)
}

// spillAnswer writes a piece of a buffered answer to its spool's file,
// on the spill goroutine, and hands the result back to the loop.
func (e *Engine) spillAnswer(j spillJob) {
	f, n, err := bodybuf.AppendFile(j.f, "", (*j.data)[:j.n])
	if !j.c.l.post(func() { j.c.spoolWritten(j, f, n, err) }) && f != nil {
		// The loop has stopped: it leaves a spool alone while a write
		// is under way, and will never see this one end.
		f.Close()
	}
}

// spoolWritten goes on once a write of a buffered answer is done.
func (c *lconn) spoolWritten(j spillJob, f *os.File, n int, err error) {
	rs := j.out
	rs.inflight = false
	rs.EndFile(f, (*j.data)[:j.n], n, err)
	*j.data = (*j.data)[:0]
	c.l.eng.spoolBufs.Put(j.data)
	if err != nil {
		c.l.logf("response buffering: the answer goes on with backpressure", err)
	}
	if rs.abandoned || c.rs != rs || c.state != lsSend {
		rs.Close()
		return
	}
	c.client().hold(c)
	c.pump()
}

// dropSpool lets go of the answer's spool, if any: at once, or when a
// file write under way ends.
func (c *lconn) dropSpool() {
	rs := c.rs
	if rs == nil {
		return
	}
	c.rs = nil
	if rs.inflight {
		rs.abandoned = true
		return
	}
	if rs.stage != nil {
		*rs.stage = (*rs.stage)[:0]
		c.l.eng.spoolBufs.Put(rs.stage)
		rs.stage = nil
	}
	rs.Close()
}
