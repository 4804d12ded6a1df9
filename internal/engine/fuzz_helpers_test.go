package engine

import (
	"bytes"
	"io"
	"testing"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// This file holds what the fuzz targets (fuzz_*_test.go, issue 10) share.
// Run one with go test -run='^$' -fuzz='^FuzzName$' -fuzztime=1m
// ./internal/engine; `make fuzz` runs them all for FUZZTIME each. A failing
// input is written to testdata/fuzz/FuzzName/ and from then on runs with
// the seeds under plain `go test`: commit it with the fix.

// pieceSource is a connection that delivers data in the pieces the fuzzer
// chose: steps[k] + 1 bytes for its k-th read, cycling through steps (all
// that is left at once when steps is empty). With block set it is
// non-blocking, as the event loop's sockets are: every piece is preceded
// by a read that returns errWouldBlock.
type pieceSource struct {
	data    []byte
	steps   []byte
	k       int
	block   bool
	blocked bool
}

func (s *pieceSource) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(s.data) == 0 {
		return 0, io.EOF
	}
	if s.block && !s.blocked {
		s.blocked = true
		return 0, errWouldBlock
	}
	s.blocked = false
	n := len(s.data)
	if len(s.steps) > 0 {
		n = int(s.steps[s.k%len(s.steps)]) + 1
		s.k++
	}
	n = copy(p, s.data[:min(n, len(s.data))])
	s.data = s.data[n:]
	return n, nil
}

// renderHead renders a head with render into a writer whose buffer is
// small (so long fields take the writer's write-through paths) and into one
// of the engines' size, and returns the bytes; it fails the test when the
// two differ.
func renderHead(t *testing.T, render func(w *writer)) []byte {
	t.Helper()
	var outs [2][]byte
	for i, size := range []int{64, writeBufSize} {
		var out bytes.Buffer
		var w writer
		w.reset(&out, make([]byte, size))
		render(&w)
		if err := w.flush(); err != nil {
			t.Fatalf("rendering into a buffer: got %v, want no error", err)
		}
		outs[i] = out.Bytes()
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Fatalf("rendered through a 64-byte buffer %q, through %d bytes %q: want the same bytes", outs[0], writeBufSize, outs[1])
	}
	return outs[1]
}

// checkWireHead fails the test unless head is a head as Helios must send
// one: every line ends in CRLF, no other CR or LF and no control byte but
// HTAB anywhere (RFC 9112 §2.2: a sender must not generate a bare CR), and
// findHeadEnd ends it exactly at its end.
func checkWireHead(t *testing.T, head []byte) {
	t.Helper()
	if end, _ := findHeadEnd(head, 0); end != len(head) {
		t.Fatalf("rendered head %q: findHeadEnd got %d, want %d", head, end, len(head))
	}
	for i, c := range head {
		switch {
		case c == '\r':
			if i+1 == len(head) || head[i+1] != '\n' {
				t.Fatalf("rendered head %q: bare CR at %d", head, i)
			}
		case c == '\n':
			if i == 0 || head[i-1] != '\r' {
				t.Fatalf("rendered head %q: bare LF at %d", head, i)
			}
		case c < ' ' && c != '\t' || c == 0x7f:
			t.Fatalf("rendered head %q: control byte %#x at %d", head, c, i)
		}
	}
}

// fieldLines renders fields as "name: value" strings, for comparisons.
func fieldLines(fields []httpmsg.Field) []string {
	out := make([]string, 0, len(fields))
	for _, f := range fields {
		out = append(out, string(f.Name)+": "+string(f.Value))
	}
	return out
}

// connectionTokens reports whether the Connection fields among fields hold
// the tokens close and keep-alive.
func connectionTokens(fields []httpmsg.Field) (closeTok, keepAlive bool) {
	for _, f := range fields {
		if f.Kind != httpmsg.KindConnection {
			continue
		}
		for _, tok := range bytes.Split(f.Value, []byte(",")) {
			tok = bytes.Trim(tok, " \t")
			// ASCII case only: strings.ToLower would fold the Kelvin
			// sign to k.
			closeTok = closeTok || httpmsg.EqualFold(tok, "close")
			keepAlive = keepAlive || httpmsg.EqualFold(tok, "keep-alive")
		}
	}
	return closeTok, keepAlive
}

// countKinds counts the fields of each kind.
func countKinds(fields []httpmsg.Field) map[httpmsg.Kind]int {
	n := make(map[httpmsg.Kind]int)
	for _, f := range fields {
		n[f.Kind]++
	}
	return n
}
