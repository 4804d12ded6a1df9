package engine

import (
	"bytes"
	"testing"

	"github.com/helios-lb/helios/internal/http1"
)

// gatherSink is a destination with WriteVec that counts its calls.
type gatherSink struct {
	b     []byte
	calls int
}

func (s *gatherSink) Write(p []byte) (int, error) {
	s.calls++
	s.b = append(s.b, p...)
	return len(p), nil
}

func (s *gatherSink) WriteVec(bufs [][]byte) (int, error) {
	s.calls++
	n := 0
	for _, p := range bufs {
		s.b = append(s.b, p...)
		n += len(p)
	}
	return n, nil
}

// TestLastPieceLeavesWithChunkEnd checks that a chunked answer's last
// piece (a compressed body, which comes whole at the end) leaves with the
// head before it and the chunked body's end behind it in one write, where
// the end used to wait for a flush of its own; with trailer fields to
// send, the end still follows (as before, on the flush); a small last
// piece stays in the buffer with its end until the flush.
func TestLastPieceLeavesWithChunkEnd(t *testing.T) {
	head := []byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
	var withTrailer trailerSection
	withTrailer.add([]byte("Grpc-Status"), []byte("0"))
	withTrailer.done()
	for _, tc := range []struct {
		name       string
		piece      int
		tr         *trailerSection
		wantCalls  int // WriteVec or Write calls before the flush
		wantBuffer bool
	}{
		{"large, no trailer", 3 * writeBufSize / 2, &noTrailer, 1, false},
		{"large, trailer fields", 3 * writeBufSize / 2, &withTrailer, 1, true},
		{"small", 100, &noTrailer, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &gatherSink{}
			c := &lconn{chunkOut: true}
			c.wr.reset(sink, make([]byte, writeBufSize))
			c.wr.Write(head)
			p := bytes.Repeat([]byte("z"), tc.piece)
			if !c.writeLastPiece(p, tc.tr) {
				t.Fatal("writeLastPiece: the client is gone")
			}
			if sink.calls != tc.wantCalls || (c.wr.buffered() > 0) != tc.wantBuffer {
				t.Errorf("%d writes with %d bytes left buffered; want %d, buffered %v", sink.calls, c.wr.buffered(), tc.wantCalls, tc.wantBuffer)
			}
			if err := c.wr.flush(); err != nil {
				t.Fatal(err)
			}
			// The bytes of a chunk and the last chunk written apart.
			want := bytes.NewBuffer(append([]byte{}, head...))
			var apart writer
			apart.reset(want, make([]byte, 64<<10))
			http1.WriteChunk(&apart, p)
			http1.WriteLastChunk(&apart, &tc.tr.hdr)
			if err := apart.flush(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(sink.b, want.Bytes()) {
				t.Errorf("got %q, want %q", sink.b[len(head):len(head)+8], want.Bytes()[len(head):len(head)+8])
			}
			if c.respBytes != int64(tc.piece) {
				t.Errorf("respBytes %d, want %d", c.respBytes, tc.piece)
			}
		})
	}
}
