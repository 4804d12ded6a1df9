//go:build race

package hpack

// raceEnabled: the race detector is on; it allocates, so allocation
// counts mean nothing then.
const raceEnabled = true
