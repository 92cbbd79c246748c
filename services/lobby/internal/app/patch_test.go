package app

import (
	"slices"
	"testing"

	"github.com/vigil-dev/vigil/services/lobby/internal/domain"
)

func codesOf(rooms []domain.Room) []string {
	out := make([]string, len(rooms))
	for i, r := range rooms {
		out[i] = r.Code
	}
	return out
}

func TestPatch(t *testing.T) {
	t.Parallel()
	old := []domain.Room{{Code: "ddd", LastActivity: 40}, {Code: "ccc", LastActivity: 30}, {Code: "bbb", LastActivity: 20}, {Code: "aaa", LastActivity: 10}}
	tests := []struct {
		name    string
		codes   []string
		changed []domain.Room
		cutoff  int64
		want    []string
	}{
		{"nothing changed", nil, nil, 0, []string{"ddd", "ccc", "bbb", "aaa"}},
		{"touched to the front", []string{"bbb"}, []domain.Room{{Code: "bbb", LastActivity: 50}}, 0, []string{"bbb", "ddd", "ccc", "aaa"}},
		{"removed", []string{"ccc"}, nil, 0, []string{"ddd", "bbb", "aaa"}},
		{"created", []string{"eee"}, []domain.Room{{Code: "eee", LastActivity: 45}}, 0, []string{"eee", "ddd", "ccc", "bbb", "aaa"}},
		{"count changed in place", []string{"ccc"}, []domain.Room{{Code: "ccc", LastActivity: 30, Viewers: 3}}, 0, []string{"ddd", "ccc", "bbb", "aaa"}},
		{"tie: greater code first", []string{"abc"}, []domain.Room{{Code: "abc", LastActivity: 20}}, 0, []string{"ddd", "ccc", "bbb", "abc", "aaa"}},
		{"idle past the cutoff", nil, nil, 25, []string{"ddd", "ccc"}},
		{"oldest moved last", []string{"ddd"}, []domain.Room{{Code: "ddd", LastActivity: 5}}, 0, []string{"ccc", "bbb", "aaa", "ddd"}},
	}
	for _, tt := range tests {
		got := codesOf(patch(old, tt.codes, tt.changed, tt.cutoff))
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: patch = %v, want %v", tt.name, got, tt.want)
		}
	}
	if got := codesOf(old); !slices.Equal(got, []string{"ddd", "ccc", "bbb", "aaa"}) {
		t.Fatalf("patch changed the shared list: %v", got)
	}
}
