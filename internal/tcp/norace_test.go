//go:build !race

package tcp

// raceEnabled: see race_test.go.
const raceEnabled = false
