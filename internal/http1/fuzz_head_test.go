package http1

import (
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
// head. (The engine's FuzzReadHead does the same through its reader.)
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
		whole, _ := FindHeadEnd(in, 0)
		if want := headEndReference(in); whole != want {
			t.Fatalf("%q: got end %d, want %d", in, whole, want)
		}
		// The prefixes a connection's buffer holds as the pieces arrive:
		// steps[k] + 1 bytes for the k-th, cycling through steps.
		buf, scanned := make([]byte, 0, len(in)), 0
		for k := 0; ; k++ {
			if len(buf) == len(in) {
				if whole >= 0 {
					t.Fatalf("%q in pieces: no end found, want %d", in, whole)
				}
				break
			}
			n := len(in) - len(buf)
			if len(steps) > 0 {
				n = min(n, int(steps[k%len(steps)])+1)
			}
			buf = append(buf, in[len(buf):len(buf)+n]...)
			end, sc := FindHeadEnd(buf, scanned)
			if want, _ := FindHeadEnd(buf, 0); end != want {
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
	})
}
