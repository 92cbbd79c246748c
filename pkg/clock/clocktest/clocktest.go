// Package clocktest gives tests a clock that moves only when the test says so: pass
// Manual.Now wherever time is injected (server.Core.Now, alarm.Options.Now, a runner's clock).
package clocktest

import (
	"sync"
	"time"
)

// Manual is a settable clock, safe for concurrent use. The zero value reads the zero time.
type Manual struct {
	mu sync.Mutex
	t  time.Time
}

// New is a Manual clock reading t.
func New(t time.Time) *Manual { return &Manual{t: t} }

// Now is the clock's time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.t
}

// Set moves the clock to t.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.t = t
}

// Add moves the clock by d.
func (m *Manual) Add(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.t = m.t.Add(d)
}
