package engine

import (
	"errors"
	"fmt"
	"os"

	"github.com/helios-lb/helios/internal/http1"
	"github.com/helios-lb/helios/internal/wire"
)

// bodyBuffering is what request buffering holds of the current request's
// body.
type bodyBuffering uint8

const (
	notBuffered    bodyBuffering = iota // the body streams (or is in the read buffer)
	bufferedWhole                       // c.bb holds the whole body
	bufferedPrefix                      // c.bb holds its start; the rest streams
)

// bodyLength returns the request body's declared length: -1 when it
// has none (chunked, or a stream's), 0 when there is no body.
func bodyLength(r *request) int64 { return r.ContentLength }

// clientBodyErr classifies an error reading a request body from the
// client: its own fault, whichever way.
func clientBodyErr(err error) error {
	switch {
	case errors.Is(err, errBodyTooLarge):
		return fmt.Errorf("%w: %w", wire.ErrBodyTooLarge, err)
	case errors.Is(err, http1.ErrMalformedChunk), errors.Is(err, http1.ErrTrailerTooLarge):
		return fmt.Errorf("%w: %w", wire.ErrBadRequest, err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: %w", wire.ErrClientTimeout, err)
	}
	return fmt.Errorf("%w: reading request body: %w", wire.ErrClientGone, err)
}
