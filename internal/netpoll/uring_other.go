//go:build unix && !linux

package netpoll

import "errors"

// RecvBatch reads many sockets in one system call on Linux (io_uring);
// elsewhere NewRecvBatch fails and the loops read each socket with read(2).
type RecvBatch struct{}

// NewRecvBatch reports that this system has no io_uring.
func NewRecvBatch(int) (*RecvBatch, error) {
	return nil, errors.New("io_uring: not on this system")
}

// Cap returns 0.
func (*RecvBatch) Cap() int { return 0 }

// Add does nothing.
func (*RecvBatch) Add(int, []byte) {}

// Run does nothing.
func (*RecvBatch) Run([]int32) error { return nil }

// Close does nothing.
func (*RecvBatch) Close() error { return nil }
