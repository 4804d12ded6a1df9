//go:build race

package h1

// raceEnabled: the race detector is on. sync.Pool drops items at random
// then, so pooled buffers allocate and allocation counts mean nothing.
const raceEnabled = true
