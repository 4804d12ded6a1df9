package engine

import (
	"bytes"
	"io"
	"testing"
)

// headEndReference is findHeadEnd written the obvious way: the end of the
// first empty line, that is the first LF followed by LF or by CRLF.
func headEndReference(b []byte) int {
	for i := 0; i < len(b); i++ {
		if b[i] != '\n' {
			continue
		}
		if i+1 < len(b) && b[i+1] == '\n' {
			return i + 2
		}
		if i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n' {
			return i + 3
		}
	}
	return -1
}

// FuzzSplitHead feeds a head to findHeadEnd in the pieces the fuzzer
// chooses, resuming each call where the last stopped scanning as the
// engines do, and checks that every call gives what a scan from the start
// of the same bytes gives, and so the end found is the one of the whole
// head. It does the same through a reader over a non-blocking source with
// a small buffer, dropping leading empty lines as the engines do, so that
// compaction and growth happen between the calls.
func FuzzSplitHead(f *testing.F) {
	for _, tt := range headEndTests {
		f.Add([]byte(tt.head), []byte{0})
		f.Add([]byte(tt.head+"BODY\r\n\r\n"), []byte{3, 0, 1, 16})
	}
	for _, tt := range requestOKTests {
		f.Add([]byte(tt.head), []byte{1, 0})
	}
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r", "GET / HTTP/1.1\r\n\r", "\r\n\r\n", "\n\n", "\n\r\n", "\r\r\n\r\n",
		"GET / HTTP/1.1\r\nX: a\r\r\n\r\n", "GET / HTTP/1.1\n\rX: a\n\n", "GET / HTTP/1.1\r\n\r\r\n\r\n",
		"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", "\r\r\r\nGET / HTTP/1.1\r\n\n",
	} {
		f.Add([]byte(s), []byte{0})
		f.Add([]byte(s), []byte{1})
	}
	f.Fuzz(func(t *testing.T, in, steps []byte) {
		whole, _ := findHeadEnd(in, 0)
		if want := headEndReference(in); whole != want {
			t.Fatalf("%q: got end %d, want %d", in, whole, want)
		}
		// The prefixes a connection's buffer holds as the pieces arrive.
		src := pieceSource{data: in, steps: steps}
		buf, scanned := make([]byte, 0, len(in)), 0
		for {
			var p [256]byte
			n, err := src.Read(p[:])
			if err == io.EOF {
				if whole >= 0 {
					t.Fatalf("%q in pieces: no end found, want %d", in, whole)
				}
				break
			}
			buf = append(buf, p[:n]...)
			end, sc := findHeadEnd(buf, scanned)
			if want, _ := findHeadEnd(buf, 0); end != want {
				t.Fatalf("%q in pieces, after %d bytes: got end %d resuming at %d, want %d as from the start", in, len(buf), end, scanned, want)
			}
			if end > 0 {
				if end != whole {
					t.Fatalf("%q in pieces: got end %d, want %d", in, end, whole)
				}
				break
			}
			if sc < scanned || sc > len(buf) {
				t.Fatalf("%q in pieces, after %d bytes: scanned went from %d to %d", in, len(buf), scanned, sc)
			}
			scanned = sc
		}

		// Through a reader, as the engines read a head.
		want, _ := findHeadEnd(bytes.TrimLeft(in, "\r\n"), 0)
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
				end, sc := findHeadEnd(b, scanned)
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
