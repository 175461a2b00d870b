//go:build !race

package netconn

// raceEnabled: see race_test.go.
const raceEnabled = false
