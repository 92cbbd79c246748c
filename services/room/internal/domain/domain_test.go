package domain

import "testing"

func TestOccupancy(t *testing.T) {
	t.Parallel()
	const now = 1000
	live := int64(now + 1)
	tests := []struct {
		name     string
		sessions []Session
		viewers  int
		leader   bool
	}{
		{"empty", nil, 0, false},
		{"leader only", []Session{{Role: Leader, ClientID: "l", LeaseUntil: live}}, 0, true},
		{"leader and two viewers", []Session{
			{Role: Leader, ClientID: "l", LeaseUntil: live},
			{Role: Viewer, ClientID: "a", LeaseUntil: live},
			{Role: Viewer, ClientID: "b", LeaseUntil: live},
		}, 2, true},
		{"one client id twice is one viewer", []Session{
			{Role: Viewer, ClientID: "a", LeaseUntil: live},
			{Role: Viewer, ClientID: "a", LeaseUntil: live},
		}, 1, false},
		{"leader's client id as a viewer too", []Session{
			{Role: Leader, ClientID: "a", LeaseUntil: live},
			{Role: Viewer, ClientID: "a", LeaseUntil: live},
		}, 1, true},
		{"closing socket is out", []Session{
			{Role: Viewer, ClientID: "a", LeaseUntil: live, Closing: true},
			{Role: Viewer, ClientID: "b", LeaseUntil: live},
		}, 1, false},
		{"lease ended is out", []Session{
			{Role: Viewer, ClientID: "a", LeaseUntil: now},
			{Role: Leader, ClientID: "l", LeaseUntil: now - 1},
		}, 0, false},
	}
	for _, tt := range tests {
		v, l := Occupancy(tt.sessions, now)
		if v != tt.viewers || l != tt.leader {
			t.Errorf("%s: Occupancy = %d, %v; want %d, %v", tt.name, v, l, tt.viewers, tt.leader)
		}
	}
}
