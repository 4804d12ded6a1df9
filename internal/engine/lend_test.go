package engine

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/helios-lb/helios/internal/netpoll"
)

// TestLentBufferReadsChunkedBodyWhole checks what lending is for: a
// 64 KiB body in 16 KiB chunks that is all there is read in one or two
// reads through a lent buffer, where the small buffer alone takes two a
// chunk (its size line, then the data behind it).
func TestLentBufferReadsChunkedBodyWhole(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	wire := chunkEncode(data, 16<<10, nil)
	for _, lend := range []bool{false, true} {
		src := &countingReader{r: bytes.NewReader(wire)}
		b, rd := newTestBody(src, headBufSize, bodyChunked, 0)
		var got []byte
		var err error
		if lend {
			got, err = readAllLent(b, 64<<10)
		} else {
			got, err = readAllPieces(b, spillSize)
		}
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("lend %v: got %d bytes, %v; want the %d sent", lend, len(got), err, len(data))
		}
		if lend && src.reads > 2 {
			t.Errorf("lent: %d reads, want at most 2", src.reads)
		}
		if !lend && src.reads < 8 {
			t.Errorf("not lent: %d reads; the test no longer shows what lending saves", src.reads)
		}
		if rd.lent() || len(rd.buf) != headBufSize {
			t.Errorf("lend %v: after the body the reader has a %d-byte buffer (lent %v), want its own back", lend, len(rd.buf), rd.lent())
		}
	}
}

// TestReaderLendReclaim checks the bytes a lend moves: unread bytes go
// into the lent buffer, the pinned head stays where its slices point, and
// reclaim brings the unread bytes back behind it; when they do not fit
// there, into a grown buffer (the head's slices keep the old one) while a
// head is pinned, or else the lent buffer stays the reader's.
func TestReaderLendReclaim(t *testing.T) {
	const head = "HEAD"
	newPinned := func(rest string) *reader {
		rd := &reader{}
		rd.reset(strings.NewReader(head+rest), make([]byte, 16))
		if err := rd.fill(); err != nil {
			t.Fatal(err)
		}
		rd.pinHead(len(head))
		return rd
	}

	t.Run("back behind the head", func(t *testing.T) {
		rd := newPinned("abcdefgh-tail")
		own := rd.buf
		big := make([]byte, 16<<10)
		if !rd.lend(big) {
			t.Fatal("lend refused")
		}
		if rd.lend(make([]byte, 16<<10)) {
			t.Fatal("a second lend was taken")
		}
		if string(own[:len(head)]) != head {
			t.Fatalf("the pinned head moved: %q", own[:len(head)])
		}
		p := make([]byte, 9)
		if n, _ := io.ReadFull(rd, p); n != 9 || string(p) != "abcdefgh-" {
			t.Fatalf("read %q through the lent buffer", p[:n])
		}
		if got := rd.reclaim(); &got[0] != &big[0] {
			t.Fatal("reclaim did not give back the lent buffer")
		}
		if &rd.buf[0] != &own[0] || rd.pin != len(head) {
			t.Fatalf("after reclaim: own buffer %v, pin %d", &rd.buf[0] == &own[0], rd.pin)
		}
		rest, _ := io.ReadAll(rd)
		if string(rest) != "tail" {
			t.Errorf("after reclaim the unread bytes are %q, want %q", rest, "tail")
		}
		if rd.reclaim() != nil {
			t.Error("reclaim with nothing lent returned a buffer")
		}
	})

	// lentFull lends a reader with a pinned head a buffer and fills it
	// with more than fits behind the head in the reader's own (a client
	// stopped in a long line, say); unpinned, the request has ended and
	// a pipelined one follows.
	lentFull := func(unpinned bool) (rd *reader, own, big []byte, long string) {
		long = strings.Repeat("abcdefghijkl", 500)
		rd = newPinned(long)
		own, big = rd.buf, make([]byte, 16<<10)
		rd.lend(big)
		if unpinned {
			rd.unpin()
		}
		for rd.fill() == nil {
		}
		return rd, own, big, long
	}

	t.Run("too many for the head's buffer", func(t *testing.T) {
		rd, own, big, long := lentFull(false)
		if len(rd.buffered()) <= len(own)-rd.homePin {
			t.Fatalf("%d bytes unread fit the reader's own %d: the test shows nothing", len(rd.buffered()), len(own))
		}
		if got := rd.reclaim(); len(got) == 0 || &got[0] != &big[0] {
			t.Fatal("reclaim did not give back the lent buffer")
		}
		if rd.lent() || &rd.buf[0] == &own[0] || &rd.buf[0] == &big[0] {
			t.Fatal("the reader did not move to a grown buffer of its own")
		}
		if string(own[:len(head)]) != head || string(rd.buf[:rd.pin]) != head {
			t.Fatalf("the pinned head: %q in the old array, %q in the new, want %q in both", own[:len(head)], rd.buf[:rd.pin], head)
		}
		if got := string(rd.buffered()); got != long {
			t.Errorf("unread bytes: %d, want the %d sent", len(got), len(long))
		}
	})

	t.Run("too many, nothing pinned", func(t *testing.T) {
		rd, own, big, long := lentFull(true)
		if got := rd.reclaim(); len(got) == 0 || &got[0] != &own[0] {
			t.Fatal("reclaim did not give back the reader's own buffer")
		}
		if rd.lent() || &rd.buf[0] != &big[0] {
			t.Fatal("the lent buffer is not the reader's now")
		}
		if got := string(rd.buffered()); got != long {
			t.Errorf("unread bytes: %d, want the %d sent", len(got), len(long))
		}
	})
}

// TestLoopStalledUploadHoldsNoBodyBuffer has a chunked upload's client
// stop twice, inside a chunk's data and inside a long chunk-size line (an
// extension of 3,000 bytes): while it waits, its connection holds no lent
// body buffer, only a read buffer of a few KiB of its own, and once it
// goes on the body reaches the backend whole.
func TestLoopStalledUploadHoldsNoBodyBuffer(t *testing.T) {
	run(t, testLoopStalledUploadHoldsNoBodyBuffer)
}

func testLoopStalledUploadHoldsNoBodyBuffer(t *testing.T, k netpoll.Kind) {
	hb, _ := newHTTPBackend(t, httpMux())
	p := startLoopProxy(t, k, loopTo(hb.Listener.Addr().String()))
	// held reads, on the loops, what the upload's connection holds.
	type held struct {
		read           int64
		buffered, size int
		lent           bool
	}
	state := func() held {
		var h held
		for _, l := range p.eng.loops {
			l.do(func() {
				for c := l.conns.head; c != nil; c = c.next {
					if c.reqBody.read > 0 || len(c.rd.buffered()) > 0 {
						h = held{c.reqBody.read, len(c.rd.buffered()), len(c.rd.buf), c.rd.lent()}
					}
				}
			})
		}
		return h
	}
	waitHeld := func(what string, read int64, buffered int) {
		t.Helper()
		var h held
		waitFor(t, what, func() bool {
			h = state()
			return h.read == read && h.buffered == buffered
		})
		if h.lent || h.size > 8<<10 {
			t.Errorf("%s: the connection holds a %d-byte read buffer (lent %v), want its own of a few KiB", what, h.size, h.lent)
		}
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 2048)
	line := "10;x=" + strings.Repeat("e", 3000)
	c := dialRaw(t, p.addr)
	c.send("POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n8000\r\n" + string(data[:20000]))
	waitHeld("stopped in a chunk's data", 20000, 0)
	c.send(string(data[20000:]) + "\r\n" + line)
	waitHeld("stopped in a chunk-size line", int64(len(data)), len(line))
	c.send("\r\n0123456789abcdef\r\n0\r\n\r\n")
	r := c.read("POST")
	if want := string(data) + "0123456789abcdef"; r.status != 200 || r.body != want {
		t.Errorf("got %d with %d bytes, want 200 with the %d sent", r.status, len(r.body), len(want))
	}
}
