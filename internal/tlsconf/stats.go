package tlsconf

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"sync/atomic"
)

// Result is how a handshake ended, the result label of
// helios_tls_handshakes_total.
type Result int

// The handshake results.
const (
	// ResultOK: the handshake completed.
	ResultOK Result = iota
	// ResultFailed: the client or Helios aborted it (no shared protocol
	// version or cipher suite, a refused client certificate, a closed
	// connection, garbage).
	ResultFailed
	// ResultTimeout: it did not complete within the handshake timeout.
	ResultTimeout
	// ResultRefused: it was never started because max_handshakes were
	// in progress and none of them was waiting for its client to shed;
	// the connection was closed.
	ResultRefused
	// ResultShed: it was stopped, waiting for its client, to make room
	// for a newer handshake when max_handshakes were in progress.
	ResultShed
	// ResultNoHello: it never began: the client closed the connection,
	// or the client hello timeout passed, before a ClientHello arrived
	// (nothing, or part of one).
	ResultNoHello
	numResults
)

// String returns the metric label: ok, failed, timeout, refused, shed,
// no_hello.
func (r Result) String() string {
	switch r {
	case ResultOK:
		return "ok"
	case ResultFailed:
		return "failed"
	case ResultTimeout:
		return "timeout"
	case ResultRefused:
		return "refused"
	case ResultShed:
		return "shed"
	case ResultNoHello:
		return "no_hello"
	}
	return "unknown"
}

// versions are the version labels, indexed as versionIndex returns.
var versions = [...]string{"unknown", "1.0", "1.1", "1.2", "1.3"}

// versionIndex maps a tls.Version* to an index of versions.
func versionIndex(v uint16) int {
	switch v {
	case tls.VersionTLS10:
		return 1
	case tls.VersionTLS11:
		return 2
	case tls.VersionTLS12:
		return 3
	case tls.VersionTLS13:
		return 4
	}
	return 0
}

// HandshakeStats counts a listener's handshakes by result, TLS version
// and whether the session was resumed. Counting is one atomic add; the
// zero value is ready to use and safe for concurrent use.
type HandshakeStats struct {
	counts [numResults][len(versions)][2]atomic.Uint64
}

// Count adds one handshake. version is a tls.Version* constant, 0 when
// unknown (a handshake that failed before one was chosen).
func (s *HandshakeStats) Count(r Result, version uint16, resumed bool) {
	if r < 0 || r >= numResults {
		r = ResultFailed
	}
	res := 0
	if resumed {
		res = 1
	}
	s.counts[r][versionIndex(version)][res].Add(1)
}

// Each calls f for every combination counted at least once, with its
// labels (result, version such as "1.3" or "unknown", resumed) and count.
func (s *HandshakeStats) Each(f func(result, version string, resumed bool, n uint64)) {
	for r := range s.counts {
		for v := range s.counts[r] {
			for res := range s.counts[r][v] {
				if n := s.counts[r][v][res].Load(); n > 0 {
					f(Result(r).String(), versions[v], res == 1, n)
				}
			}
		}
	}
}

// Classify returns the Result of a handshake that ended with err: ok for
// nil, timeout for a deadline (the handshake timeout), failed otherwise.
func Classify(err error) Result {
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return ResultTimeout
	}
	return ResultFailed
}
