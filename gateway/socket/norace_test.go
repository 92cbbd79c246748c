//go:build !race

package socket

// raceEnabled: see race_test.go.
const raceEnabled = false
