package http1

import (
	"bytes"
	"testing"
)

// thenSink is a bufSink with WriteThen, recording what it was given.
type thenSink struct {
	bufSink
	piece []byte
	then  string
}

func (s *thenSink) WriteThen(p []byte, v string) {
	s.piece, s.then = p, v
	s.b = append(append(s.b, p...), v...)
}

// TestWriteFinalChunk checks that the last chunk and the body's end
// written together are the bytes of a chunk and an empty trailer written
// apart, and that a Sink with WriteThen gets the piece and all the
// framing behind it in that one call.
func TestWriteFinalChunk(t *testing.T) {
	p := bytes.Repeat([]byte("helios "), 300)
	var apart bufSink
	WriteChunk(&apart, p)
	WriteLastChunk(&apart, nil)

	var plain bufSink
	WriteFinalChunk(&plain, p)
	if !bytes.Equal(plain.b, apart.b) {
		t.Errorf("WriteFinalChunk: got %q..., want %q...", plain.b[:12], apart.b[:12])
	}
	var then thenSink
	WriteFinalChunk(&then, p)
	if !bytes.Equal(then.b, apart.b) {
		t.Errorf("WriteFinalChunk through WriteThen: got %q..., want %q...", then.b[:12], apart.b[:12])
	}
	if !bytes.Equal(then.piece, p) || then.then != "\r\n0\r\n\r\n" {
		t.Errorf("WriteThen got a %d-byte piece and %q, want the %d-byte piece and the chunk's end with the last chunk", len(then.piece), then.then, len(p))
	}
}
