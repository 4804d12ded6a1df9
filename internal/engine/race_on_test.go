//go:build race

package engine

// raceEnabled: the race detector is on. sync.Pool drops items at random
// then, so pooled buffers allocate and allocation counts mean nothing.
const raceEnabled = true
