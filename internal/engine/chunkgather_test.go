//go:build linux

package engine

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/helios-lb/helios/internal/http1"
	"github.com/helios-lb/helios/internal/netpoll"
	"golang.org/x/sys/unix"
)

// gatherPieces returns n pieces of a body of varied sizes, as views into
// one buffer (as the lent buffer's), and the body's chunked encoding.
func gatherPieces(n int) (pieces [][]byte, encoded []byte) {
	sizes := []int{16 << 10, 1, 300, 16<<10 - 7, 4096}
	total := 0
	for i := 0; i < n; i++ {
		total += sizes[i%len(sizes)]
	}
	lent := make([]byte, total)
	for i := range lent {
		lent[i] = byte('a' + i%26)
	}
	var enc writer
	var out bytes.Buffer
	enc.reset(&out, make([]byte, 1<<20))
	for off, i := 0, 0; i < n; i++ {
		p := lent[off : off+sizes[i%len(sizes)]]
		off += len(p)
		pieces = append(pieces, p)
		http1.WriteChunk(&enc, p)
	}
	http1.WriteLastChunk(&enc, nil)
	enc.flush()
	return pieces, out.Bytes()
}

// gatherSetup returns a loop and a client connection whose backend
// writes to a counting sink.
func gatherSetup() (*loop, *gatherSink, *lconn) {
	l, sink := &loop{}, &gatherSink{}
	u := &lupconn{state: upBody}
	u.w.reset(sink, make([]byte, writeBufSize))
	return l, sink, &lconn{l: l, up: u}
}

// TestChunkGather checks that a pump's chunks go to the backend together:
// after the request head the backend's writer holds, in one write for
// every maxGatherChunks chunks, the body's end with the last; that the
// bytes are the chunked encoding of the pieces; and that the reader's
// hook (a lent buffer about to be read over) writes what is gathered.
func TestChunkGather(t *testing.T) {
	head := []byte("POST /up HTTP/1.1\r\nHost: b\r\nTransfer-Encoding: chunked\r\n\r\n")
	for _, n := range []int{1, 3, maxGatherChunks, 2*maxGatherChunks + 1} {
		t.Run(fmt.Sprintf("%d chunks", n), func(t *testing.T) {
			pieces, encoded := gatherPieces(n)
			l, sink, c := gatherSetup()
			u := c.up
			u.w.Write(head)
			for _, p := range pieces {
				l.gatherChunk(c, p)
			}
			l.endChunks(c)
			if want := (n + maxGatherChunks - 1) / maxGatherChunks; sink.calls != want {
				t.Errorf("%d writes, want %d", sink.calls, want)
			}
			if want := append(append([]byte{}, head...), encoded...); !bytes.Equal(sink.b, want) {
				t.Errorf("got %d bytes, want %d (first difference at %d)", len(sink.b), len(want), firstDiff(sink.b, want))
			}
			if l.gather.n != 0 || l.gather.owner != nil || u.w.buffered() != 0 {
				t.Errorf("left: %d chunks gathered (owner %v), %d bytes buffered", l.gather.n, l.gather.owner != nil, u.w.buffered())
			}
		})
	}

	t.Run("before the reader fills", func(t *testing.T) {
		l, sink, c := gatherSetup()
		c.rd.reset(bytes.NewReader([]byte("more")), make([]byte, 64))
		c.rd.beforeFill = l.beforeFill
		l.gatherChunk(c, []byte("held"))
		if err := c.rd.fill(); err != nil {
			t.Fatal(err)
		}
		if sink.calls != 1 || string(sink.b) != "4\r\nheld\r\n" || l.gather.n != 0 {
			t.Errorf("after fill: %d writes of %q, %d chunks still gathered; want the chunk written first", sink.calls, sink.b, l.gather.n)
		}
	})

	t.Run("dropped when the client closes", func(t *testing.T) {
		l, sink, c := gatherSetup()
		l.gatherChunk(c, []byte("held"))
		l.dropGather(&lconn{})
		if l.gather.n != 1 {
			t.Fatal("another connection's drop dropped the chunk")
		}
		l.dropGather(c)
		l.flushGather()
		if sink.calls != 0 || l.gather.n != 0 {
			t.Errorf("%d writes after the drop, %d chunks left; want none", sink.calls, l.gather.n)
		}
	})
}

// TestChunkGatherPartialWrites writes more chunks than a small socket
// buffer takes at once: what the socket does not take waits in the
// backend's pending bytes and arrives whole and in order.
func TestChunkGatherPartialWrites(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if err := unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 4096); err != nil {
		t.Fatal(err)
	}
	p, err := netpoll.New(netpoll.Native())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()
	pieces, encoded := gatherPieces(2*maxGatherChunks + 3)
	l := &loop{}
	u := &lupconn{state: upBody}
	u.fw = fdWriter{fd: fds[0], p: p, file: -1}
	u.w.reset(&u.fw, make([]byte, writeBufSize))
	c := &lconn{l: l, up: u}
	for _, p := range pieces {
		l.gatherChunk(c, p)
	}
	l.endChunks(c)
	if u.w.err != nil {
		t.Fatal(u.w.err)
	}
	if len(u.fw.pending) == 0 {
		t.Fatal("a 4 KiB send buffer took everything at once: the partial case did not happen")
	}
	readPairInOrder(t, &u.fw, fds[1], encoded)
}
