package index

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vigil-dev/vigil/services/lobby/internal/domain"
)

// model is the simple computation the index must agree with: every room by code, sorted
// and filtered from scratch on every question.
type model map[string]domain.Room

func (m model) sorted() []domain.Room {
	out := make([]domain.Room, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	slices.SortFunc(out, domain.ByActivity)
	return out
}

// page is a page computed the simple way: scan every room in order.
func (m model) page(after *domain.Position, size int, q Query) (codes []string, more bool) {
	for _, r := range m.sorted() {
		if after != nil && after.AtOrBefore(r) {
			continue
		}
		if q.Joinable && !r.LeaderPresent || !q.Match.Match(domain.FoldName(r.Name)) {
			continue
		}
		if len(codes) == size {
			return codes, true
		}
		codes = append(codes, r.Code)
	}
	return codes, false
}

var (
	names   = []string{"Salsa Tuesday", "Café Crème", "Niño y Niña", "Tango", "Straße", "salsa", "Cafe", "東京の夜", "Practice room"}
	queries = []string{"", "salsa", "tue sal", "cafe", "café", "niño", "nino", "zzz", "ss", "e", "a", "東京", "room practice"}
)

func describe(r domain.Room) string {
	return fmt.Sprintf("%s@%d v%d l%v %q", r.Code, r.LastActivity, r.Viewers, r.LeaderPresent, r.Name)
}

func describeAll(rooms []domain.Room) []string {
	out := make([]string, len(rooms))
	for i, r := range rooms {
		out[i] = describe(r)
	}
	return out
}

func describeList(l *List) []string {
	var out []string
	for _, r := range l.All() {
		out = append(out, describe(*r))
	}
	return out
}

// TestIndexAgreesWithTheSimpleComputation applies random batches of creates, touches,
// occupancy changes, removals and a rising idle cutoff to an index and to a plain map, and
// after every batch compares the whole list, random pages and searches, and that every List
// handed out earlier is unchanged.
func TestIndexAgreesWithTheSimpleComputation(t *testing.T) {
	t.Parallel()
	for _, blockSize := range []int{4, 7, defaultBlockSize} {
		for seed := range uint64(20) {
			t.Run(fmt.Sprintf("block %d seed %d", blockSize, seed), func(t *testing.T) {
				t.Parallel()
				checkAgainstModel(t, blockSize, seed)
			})
		}
	}
}

func checkAgainstModel(t *testing.T, blockSize int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 26))
	x := newIndex(blockSize)
	m := model{}
	now, cutoff := int64(1000), int64(0)
	next := 0
	type held struct {
		list *List
		want []string
	}
	var kept []held
	for batch := range 120 {
		var codes []string
		for range 1 + rng.IntN(12) {
			var code string
			if len(m) > 0 {
				all := slices.Sorted(maps.Keys(m))
				code = all[rng.IntN(len(all))]
			}
			now += int64(rng.IntN(3)) // small steps: rooms share activity times
			switch op := rng.IntN(10); {
			case op < 3 || len(m) == 0:
				code = fmt.Sprintf("r%04d", next)
				next++
				m[code] = domain.Room{Code: code, Name: names[rng.IntN(len(names))], LastActivity: now, CreatedAt: now}
			case op < 6:
				r := m[code]
				r.LastActivity = max(r.LastActivity, now)
				m[code] = r
			case op < 9:
				r := m[code]
				r.Viewers, r.LeaderPresent = int32(rng.IntN(5)), rng.IntN(2) == 0
				m[code] = r
			default:
				delete(m, code)
			}
			codes = append(codes, code)
		}
		if rng.IntN(4) == 0 {
			cutoff = now - int64(rng.IntN(40))
		}
		for c, r := range m {
			if r.LastActivity < cutoff {
				delete(m, c)
			}
		}
		// What the store would read back: the named rooms still there and not idle.
		var changed []domain.Room
		for _, c := range codes {
			if r, ok := m[c]; ok && !slices.ContainsFunc(changed, func(o domain.Room) bool { return o.Code == c }) {
				changed = append(changed, r)
			}
		}
		var l *List
		if batch%40 == 39 {
			l = x.Load(m.sorted()) // a full reload now and then, as after a trimmed log
		} else {
			l = x.Apply(codes, changed, cutoff)
		}
		want := describeAll(m.sorted())
		if got := describeList(l); !slices.Equal(got, want) {
			t.Fatalf("batch %d: list =\n%v\nwant\n%v", batch, got, want)
		}
		if l.Len() != len(want) {
			t.Fatalf("batch %d: Len = %d, want %d", batch, l.Len(), len(want))
		}
		for _, b := range l.blocks {
			if len(b.rooms) == 0 || len(b.rooms) > blockSize {
				t.Fatalf("batch %d: a block of %d rooms (block size %d)", batch, len(b.rooms), blockSize)
			}
		}
		for _, h := range kept {
			if got := describeList(h.list); !slices.Equal(got, h.want) {
				t.Fatalf("batch %d: an earlier List changed: %v, want %v", batch, got, h.want)
			}
		}
		if batch%10 == 0 {
			kept = append(kept, held{l, want})
		}
		checkPages(t, rng, l, m)
	}
}

func checkPages(t *testing.T, rng *rand.Rand, l *List, m model) {
	t.Helper()
	sorted := m.sorted()
	for range 10 {
		q, err := domain.ParseQuery(queries[rng.IntN(len(queries))])
		if err != nil {
			t.Fatal(err)
		}
		iq := Query{Match: q, Joinable: rng.IntN(3) == 0}
		var after *domain.Position
		switch {
		case rng.IntN(3) == 0:
		case len(sorted) > 0 && rng.IntN(2) == 0:
			r := sorted[rng.IntN(len(sorted))]
			after = &domain.Position{LastActivity: r.LastActivity, Code: r.Code}
		default: // a position no room is at (a room since moved or removed)
			after = &domain.Position{LastActivity: 1000 + int64(rng.IntN(400)), Code: fmt.Sprintf("r%04d", rng.IntN(300))}
		}
		size := 1 + rng.IntN(6)
		wantCodes, wantMore := m.page(after, size, iq)
		got, more := l.Page(after, size, iq)
		var gotCodes []string
		for _, r := range got {
			gotCodes = append(gotCodes, r.Code)
		}
		if !slices.Equal(gotCodes, wantCodes) || more != wantMore {
			t.Fatalf("Page(%v, %d, %v) = %v, more %v; want %v, more %v", after, size, iq, gotCodes, more, wantCodes, wantMore)
		}
	}
}

// TestPagesWalkEveryRoomOnce pages through a loaded index of 1,000 rooms, 50 at a time, and
// sees every room once, in order, with a last page that says no more follow.
func TestPagesWalkEveryRoomOnce(t *testing.T) {
	t.Parallel()
	var rooms []domain.Room
	for i := range 1000 {
		rooms = append(rooms, domain.Room{Code: fmt.Sprintf("r%04d", i), Name: "Room", LastActivity: int64(i / 3)})
	}
	l := New().Load(rooms)
	var got []string
	var after *domain.Position
	for n := 0; ; n++ {
		page, more := l.Page(after, 50, Query{})
		for _, r := range page {
			got = append(got, r.Code)
		}
		if !more {
			break
		}
		last := page[len(page)-1]
		after = &domain.Position{LastActivity: last.LastActivity, Code: last.Code}
		if n > 20 {
			t.Fatalf("still paging after %d pages", n)
		}
	}
	want := make([]string, 0, len(rooms))
	for _, r := range model(func() map[string]domain.Room {
		m := map[string]domain.Room{}
		for _, r := range rooms {
			m[r.Code] = r
		}
		return m
	}()).sorted() {
		want = append(want, r.Code)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged %d rooms, want all %d in order", len(got), len(want))
	}
}

// BenchmarkApplyOneChange10k times a refresh after one touch of a 10,000-room lobby (run with
// -bench; not in the suite).
func BenchmarkApplyOneChange10k(b *testing.B) {
	var rooms []domain.Room
	for i := range 10000 {
		rooms = append(rooms, domain.Room{Code: fmt.Sprintf("r%05d", i), Name: fmt.Sprintf("Practice room %d", i), LastActivity: int64(i)})
	}
	x := New()
	x.Load(rooms)
	now := int64(10000)
	for b.Loop() {
		now++
		c := fmt.Sprintf("r%05d", now%10000)
		x.Apply([]string{c}, []domain.Room{{Code: c, Name: "Practice room", LastActivity: now}}, 0)
	}
}

// BenchmarkSearchNothing10k times a search that matches no room of 10,000 (run with -bench).
func BenchmarkSearchNothing10k(b *testing.B) {
	var rooms []domain.Room
	for i := range 10000 {
		rooms = append(rooms, domain.Room{Code: fmt.Sprintf("r%05d", i), Name: fmt.Sprintf("Practice room %d", i), LastActivity: int64(i)})
	}
	l := New().Load(rooms)
	q, _ := domain.ParseQuery("zzz")
	for b.Loop() {
		if got, _ := l.Page(nil, 50, Query{Match: q}); len(got) != 0 {
			b.Fatalf("found %d rooms", len(got))
		}
	}
}

// TestApply is the changes a refresh applies, one at a time, to a list of four rooms.
func TestApply(t *testing.T) {
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
		for _, size := range []int{2, defaultBlockSize} {
			x := newIndex(size)
			before := x.Load(old)
			var got []string
			for _, r := range x.Apply(tt.codes, tt.changed, tt.cutoff).All() {
				got = append(got, r.Code)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("%s (blocks of %d): Apply = %v, want %v", tt.name, size, got, tt.want)
			}
			if got := describeList(before); !slices.Equal(got, describeAll(old)) {
				t.Errorf("%s (blocks of %d): Apply changed the earlier List: %v", tt.name, size, got)
			}
		}
	}
}
