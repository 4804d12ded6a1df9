package engine

import (
	"io"
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
