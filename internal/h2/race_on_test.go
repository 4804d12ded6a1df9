//go:build race

package h2

// raceEnabled: the race detector is on; it allocates, so allocation
// counts mean nothing then.
const raceEnabled = true
