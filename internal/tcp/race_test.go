//go:build race

package tcp

// raceEnabled: the race detector makes sync.Pool drop objects at random, so
// allocation counts mean nothing under -race.
const raceEnabled = true
