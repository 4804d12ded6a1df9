package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/helios-lb/helios/internal/wire"
)

// maxResponseHead bounds a backend's response head.
const maxResponseHead = 64 << 10

// How a backend exchange's failures are classified: the client's doing,
// a stale connection, or the backend's.

// clientFault reports whether err is the client's doing: it left, its
// request stalled, or its body was malformed. Such errors never count
// against a backend.
func clientFault(err error) bool {
	return errors.Is(err, wire.ErrClientGone) || errors.Is(err, wire.ErrClientTimeout) ||
		errors.Is(err, wire.ErrBadRequest) || errors.Is(err, wire.ErrBodyTooLarge)
}

// isStale reports whether err looks like a reused connection the backend
// had already closed: EOF or reset before any response byte.
func isStale(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err)
}

func idempotent(m []byte) bool {
	switch string(m) {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	return false
}

// classifyErr wraps a raw error with the wire sentinel the pipeline acts on.
func classifyErr(err error, addr string) error {
	switch {
	case clientFault(err),
		errors.Is(err, wire.ErrConnect), errors.Is(err, wire.ErrTimeout), errors.Is(err, wire.ErrBackend):
		return err
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: %s: %w", wire.ErrTimeout, addr, err)
	default:
		return fmt.Errorf("%w: %s: %w", wire.ErrBackend, addr, err)
	}
}

func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
