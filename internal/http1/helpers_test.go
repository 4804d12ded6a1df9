package http1

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// bufSink is a Sink over a growing buffer.
type bufSink struct{ b []byte }

func (s *bufSink) Write(p []byte) (int, error)       { s.b = append(s.b, p...); return len(p), nil }
func (s *bufSink) WriteString(v string) (int, error) { s.b = append(s.b, v...); return len(v), nil }
func (s *bufSink) WriteInt(v int64)                  { s.b = strconv.AppendInt(s.b, v, 10) }
func (s *bufSink) WriteHex(v int64)                  { s.b = strconv.AppendInt(s.b, v, 16) }
func (s *bufSink) Field(name, value []byte) {
	s.b = append(append(append(append(s.b, name...), ": "...), value...), "\r\n"...)
}

// renderHead returns what render writes.
func renderHead(t *testing.T, render func(w Sink)) []byte {
	t.Helper()
	var s bufSink
	render(&s)
	return s.b
}

// checkWireHead fails the test unless head is a head as Helios must send
// one: every line ends in CRLF, no other CR or LF and no control byte but
// HTAB anywhere (RFC 9112 §2.2: a sender must not generate a bare CR), and
// findHeadEnd ends it exactly at its end.
func checkWireHead(t *testing.T, head []byte) {
	t.Helper()
	if end, _ := FindHeadEnd(head, 0); end != len(head) {
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
