package engine

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/helios-lb/helios/internal/http1"
)

// FuzzReadHead reads a head as a connection does: through a reader with a
// small buffer over a non-blocking source that delivers it in the pieces
// the fuzzer chooses, dropping leading empty lines, resuming
// http1.FindHeadEnd where it last stopped scanning, so that compaction and
// growth happen between the calls; the end found must be the one of the
// whole head. (internal/http1's FuzzSplitHead checks FindHeadEnd itself.)
func FuzzReadHead(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n", "GET / HTTP/1.1\r\nHost: a\r\n\r\nBODY\r\n\r\n",
		"GET /" + strings.Repeat("a", 100) + " HTTP/1.1\r\nHost: a\r\nX: " + strings.Repeat("b", 200) + "\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\n\r", "GET / HTTP/1.1\r\n\r", "\r\n\r\n", "\n\n", "\n\r\n", "\r\r\n\r\n",
		"GET / HTTP/1.1\r\nX: a\r\r\n\r\n", "GET / HTTP/1.1\n\rX: a\n\n", "GET / HTTP/1.1\r\n\r\r\n\r\n",
		"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", "\r\r\r\nGET / HTTP/1.1\r\n\n",
	} {
		f.Add([]byte(s), []byte{0})
		f.Add([]byte(s), []byte{1})
		f.Add([]byte(s), []byte{3, 0, 1, 16})
	}
	f.Fuzz(func(t *testing.T, in, steps []byte) {
		var scanned int
		want, _ := http1.FindHeadEnd(bytes.TrimLeft(in, "\r\n"), 0)
		rd := &reader{}
		rd.reset(&pieceSource{data: in, steps: steps, block: true}, make([]byte, 16))
		scanned = 0
		for i := 0; ; i++ {
			if i > 4*len(in)+8 {
				t.Fatalf("%q through a reader: no progress", in)
			}
			b := rd.buffered()
			if scanned == 0 {
				for len(b) > 0 && (b[0] == '\r' || b[0] == '\n') {
					rd.discard(1)
					b = b[1:]
				}
			}
			if len(b) > 0 {
				end, sc := http1.FindHeadEnd(b, scanned)
				if end > 0 {
					if end != want {
						t.Fatalf("%q through a reader: got end %d, want %d", in, end, want)
					}
					return
				}
				scanned = sc
			}
			switch err := rd.fill(); err {
			case nil, errWouldBlock:
			case errBufferFull:
				rd.grow(2 * len(rd.buf))
			case io.EOF:
				if want >= 0 {
					t.Fatalf("%q through a reader: no end found, want %d", in, want)
				}
				return
			default:
				t.Fatalf("%q through a reader: got %v", in, err)
			}
		}
	})
}
