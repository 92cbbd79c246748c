package domain

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/vigil-dev/vigil/pkg/input"
)

// MaxNameBytes bounds a person's display name.
const MaxNameBytes = 80

// Person is one person present in a room: a role and a client id (a viewer's sessions with one
// client id are one person, as they are one viewer), under the name their first session gave.
type Person struct {
	Role     Role
	ClientID string
	Name     string
	// Since is when the person arrived (ms since the Unix epoch).
	Since int64
}

// CheckName validates a display name: 1-80 bytes of UTF-8 without control characters.
func CheckName(name string) error { return input.Name("name", name, MaxNameBytes) }

// DefaultName is the name of a person who gave none: "Dancer" and a short number drawn from
// the client id, so a device keeps its number across reconnects.
func DefaultName(clientID string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(clientID))
	return fmt.Sprintf("Dancer %d", h.Sum32()%1000+1)
}

// SortPeople puts people in order of arrival (ties: leaders first, then by client id).
func SortPeople(p []Person) {
	slices.SortFunc(p, func(a, b Person) int {
		return cmp.Or(cmp.Compare(a.Since, b.Since), leaderFirst(a.Role, b.Role), strings.Compare(a.ClientID, b.ClientID))
	})
}

// leaderFirst orders a leader before anyone else.
func leaderFirst(a, b Role) int {
	switch {
	case a == b:
		return 0
	case a == Leader:
		return -1
	case b == Leader:
		return 1
	}
	return 0
}
