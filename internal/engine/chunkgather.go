package engine

import (
	"github.com/helios-lb/helios/internal/http1"
)

// The chunk gather. A chunked request body forwarded to an HTTP/1.1
// backend goes out as chunks of the sizes it came in (a browser's or
// client library's, often 16 KiB or less), each its size line, its data
// and a CRLF. While the client's reader reads into a lent body buffer
// (reqPiece), one read holds several chunks, and writing each cost a
// writev(2) of its own: 64 for a 1 MiB body in 16 KiB chunks. The pump
// gathers them instead, the data as views into the lent buffer, and they
// leave together, in one writev, after what the backend's writer holds:
//   - before the reader reads again or moves its bytes (reader.beforeFill,
//     set while the buffer is lent), which would overwrite the views;
//   - before the pump writes anything else to the backend, and with the
//     body's last chunk when it has no trailer fields;
//   - when the pump returns (endReqPump), before the lent buffer goes
//     back; a connection that closes instead drops them (dropGather);
//   - when maxGatherChunks are held.
// A loop pumps one body at a time and the gather is empty between
// events, so there is one gather per loop.

// maxGatherChunks bounds the chunks one gather holds: three slices each,
// with the writer's buffered bytes before them and the last chunk behind
// them, within what one writev takes (netpoll.MaxWritev).
const maxGatherChunks = 20

// chunkGather holds the chunks of one pump of a request body.
type chunkGather struct {
	// owner is the client connection whose body the chunks are.
	owner *lconn
	// bufs are the slices to write: [0] for the backend writer's
	// buffered bytes (set as they go), then each chunk's size line, data
	// and CRLF, then room for the last chunk.
	bufs [2 + 3*maxGatherChunks][]byte
	// lines hold the chunks' size lines.
	lines [maxGatherChunks][20]byte
	// n counts the chunks held.
	n int
}

var (
	chunkEndBytes  = []byte(http1.ChunkEnd)
	lastChunkBytes = []byte(http1.LastChunk)
)

// gatherChunk adds p, a piece of c's chunked request body that is a view
// into its reader's lent buffer, as one chunk; a full gather goes out
// first.
func (l *loop) gatherChunk(c *lconn, p []byte) {
	g := &l.gather
	if g.owner != c || g.n == maxGatherChunks {
		l.flushGather()
	}
	g.owner = c
	i := 1 + 3*g.n
	g.bufs[i] = http1.AppendChunkHead(g.lines[g.n][:0], int64(len(p)))
	g.bufs[i+1] = p
	g.bufs[i+2] = chunkEndBytes
	g.n++
}

// flushGather writes the gathered chunks to their backend, behind what
// its writer holds, in one system call.
func (l *loop) flushGather() {
	if g := &l.gather; g.n > 0 {
		l.writeGather(g.owner, false)
	}
}

// endChunks writes c's gathered chunks and the body's last chunk (no
// trailer fields) behind them, in one system call.
func (l *loop) endChunks(c *lconn) {
	if l.gather.owner != c {
		l.flushGather()
	}
	l.writeGather(c, true)
}

func (l *loop) writeGather(c *lconn, last bool) {
	g := &l.gather
	n := 1 + 3*g.n
	if last {
		g.bufs[n] = lastChunkBytes
		n++
	}
	if u := c.up; u != nil && u.state != upClosed {
		u.w.writeVecAfter(g.bufs[:n])
	}
	l.resetGather()
}

// dropGather drops c's gathered chunks unwritten (c is closing; its lent
// buffer goes back to the loop).
func (l *loop) dropGather(c *lconn) {
	if l.gather.owner == c {
		l.resetGather()
	}
}

func (l *loop) resetGather() {
	g := &l.gather
	clear(g.bufs[:])
	g.owner, g.n = nil, 0
}

// beforeFill is the lent reader's hook (reader.beforeFill): the
// gathered chunks go out before the reader reads over them, and the
// read is capped (reader.max, set by reqPiece) at what the backend has
// room for once they have.
func (l *loop) beforeFill() {
	c := l.gather.owner
	if c == nil {
		return
	}
	l.flushGather()
	if u := c.up; u != nil && c.rd.max > 0 {
		c.rd.max = max(1, c.opts.outputLimit()-len(u.fw.pending))
	}
}
