//go:build !race

package afxdp

// raceEnabled: see race_test.go.
const raceEnabled = false
