//go:build race

package socket

// raceEnabled: the race detector makes sync.Pool drop a share of what is put back, on purpose,
// so a test cannot hold pooled paths to zero allocations under it.
const raceEnabled = true
