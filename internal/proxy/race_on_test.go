//go:build race

package proxy

// raceEnabled: the race detector is on. sync.Pool drops items at random
// then, so pooled copies allocate and allocation counts mean nothing.
const raceEnabled = true
