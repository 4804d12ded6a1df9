package engine

import (
	"bytes"
	"io"
	"strings"
	"testing"
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
// reclaim brings the unread bytes back behind it, or, when they do not fit
// there, waits for the head to be unpinned and then keeps the lent buffer.
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

	t.Run("too many for the head's buffer", func(t *testing.T) {
		long := strings.Repeat("abcdefghijkl", 500)
		rd := newPinned(long)
		own := rd.buf
		big := make([]byte, 16<<10)
		rd.lend(big)
		// More arrives than fits behind the head in the reader's
		// own buffer.
		for rd.fill() == nil {
		}
		if len(rd.buffered()) <= len(own)-rd.homePin {
			t.Fatalf("%d bytes unread fit the reader's own %d: the test shows nothing", len(rd.buffered()), len(own))
		}
		if rd.reclaim() != nil {
			t.Fatal("reclaim gave a buffer back while the unread bytes could not move behind the pinned head")
		}
		rd.unpin()
		if got := rd.reclaim(); &got[0] != &own[0] {
			t.Fatal("after unpin, reclaim did not give back the reader's own buffer")
		}
		if rd.lent() || &rd.buf[0] != &big[0] {
			t.Fatal("the lent buffer is not the reader's now")
		}
		if got := string(rd.buffered()); got != long {
			t.Errorf("unread bytes: %d, want the %d sent", len(got), len(long))
		}
	})
}
