// Package index keeps a Lobby replica's copy of the rooms in list order (most recently active
// first, then by code, descending: domain.ByActivity) so that keeping it current costs what
// changed, not what is listed.
//
// A List is immutable: a sequence of small blocks of rooms, each with its rooms' search text
// laid out in one string. Applying changes copies only the blocks they touch (and the short
// slice of block pointers), so a refresh after a few changes of a 10,000-room lobby copies a
// few hundred pointers instead of every room, and readers keep paging the List they hold
// while a newer one is built. A page finds its start by binary search over the blocks, and a
// search looks for one word of the query in each block's text (strings.Index, vectorised)
// and checks the rest only where it occurs.
package index

import (
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/vigil-dev/vigil/services/lobby/internal/domain"
)

// defaultBlockSize is the most rooms in one block. Small enough that copying a touched block
// is cheap, large enough that the block pointers of 10,000 rooms are a short slice.
const defaultBlockSize = 128

// block is a run of rooms in list order. It is never modified once built.
type block struct {
	rooms []*domain.Room
	// text is every room's domain.Folded.Bare, each followed by '\n' (a name holds no control
	// character, so a search word never spans two rooms); ends[i] is the offset just past
	// room i's '\n'.
	text string
	ends []int32
}

func newBlock(rooms []*domain.Room) *block {
	n := 0
	for _, r := range rooms {
		n += len(r.Search.Bare()) + 1
	}
	var sb strings.Builder
	sb.Grow(n)
	ends := make([]int32, len(rooms))
	for i, r := range rooms {
		sb.WriteString(r.Search.Bare())
		sb.WriteByte('\n')
		ends[i] = int32(sb.Len())
	}
	return &block{rooms: rooms, text: sb.String(), ends: ends}
}

func (b *block) last() *domain.Room { return b.rooms[len(b.rooms)-1] }

// start is the offset of room i's text.
func (b *block) start(i int) int {
	if i == 0 {
		return 0
	}
	return int(b.ends[i-1])
}

// roomAt is the room whose text holds offset off.
func (b *block) roomAt(off int) int {
	j, _ := slices.BinarySearch(b.ends, int32(off+1))
	return j
}

// List is one version of the rooms in list order. It is never modified: Index.Apply returns a
// new List sharing the blocks that did not change.
type List struct {
	blocks []*block
	n      int
}

// Len is the number of rooms in l.
func (l *List) Len() int {
	if l == nil {
		return 0
	}
	return l.n
}

// All returns every room in list order (for tests and small lobbies).
func (l *List) All() []*domain.Room {
	if l == nil {
		return nil
	}
	out := make([]*domain.Room, 0, l.n)
	for _, b := range l.blocks {
		out = append(out, b.rooms...)
	}
	return out
}

// Last is the least recently active room, nil when l is empty.
func (l *List) Last() *domain.Room {
	if l.Len() == 0 {
		return nil
	}
	return l.blocks[len(l.blocks)-1].last()
}

// seek returns the place (block bi, room i) of the first room for which before is false;
// before must hold for a prefix of the list and for no room after it.
func (l *List) seek(before func(*domain.Room) bool) (bi, i int) {
	bi = sort.Search(len(l.blocks), func(k int) bool { return !before(l.blocks[k].last()) })
	if bi == len(l.blocks) {
		return bi, 0
	}
	rooms := l.blocks[bi].rooms
	return bi, sort.Search(len(rooms), func(k int) bool { return !before(rooms[k]) })
}

// after returns the place of the first room after position p.
func (l *List) after(p domain.Position) (bi, i int) {
	return l.seek(func(r *domain.Room) bool { return p.AtOrBefore(*r) })
}

// at returns the place of the room at position p, or of the first room after it.
func (l *List) at(p domain.Position) (bi, i int) {
	q := domain.Room{LastActivity: p.LastActivity, Code: p.Code}
	return l.seek(func(r *domain.Room) bool { return domain.ByActivity(*r, q) < 0 })
}

// Query is what a page keeps: rooms whose name Match matches and, when Joinable, whose leader
// is present.
type Query struct {
	Match    domain.Query
	Joinable bool
}

func (q Query) keeps(r *domain.Room) bool {
	return (!q.Joinable || r.LeaderPresent) && q.Match.Match(r.Search)
}

// Page returns the first size rooms after position after (nil: from the first room) that q
// keeps, and whether another room q keeps follows them.
func (l *List) Page(after *domain.Position, size int, q Query) (rooms []*domain.Room, more bool) {
	if l.Len() == 0 || size <= 0 {
		return nil, false
	}
	bi, i := 0, 0
	if after != nil {
		bi, i = l.after(*after)
	}
	probe, hasProbe := q.Match.Probe()
	rooms = make([]*domain.Room, 0, min(size, l.n))
	// take adds r to the page; it reports false when the page was already full (r is the
	// proof that more follow).
	take := func(r *domain.Room) bool {
		if len(rooms) == size {
			more = true
			return false
		}
		rooms = append(rooms, r)
		return true
	}
	for ; bi < len(l.blocks); bi, i = bi+1, 0 {
		b := l.blocks[bi]
		if !hasProbe {
			for _, r := range b.rooms[i:] {
				if q.keeps(r) && !take(r) {
					return rooms, more
				}
			}
			continue
		}
		// Only rooms whose text holds the probe word can match: look for it in the block's
		// text and check the whole query at each room it occurs in.
		for off := b.start(i); off < len(b.text); {
			k := strings.Index(b.text[off:], probe)
			if k < 0 {
				break
			}
			j := b.roomAt(off + k)
			if r := b.rooms[j]; q.keeps(r) && !take(r) {
				return rooms, more
			}
			off = int(b.ends[j])
		}
	}
	return rooms, more
}

// Index is the current List and what keeps it current: a map from code to room, so a change
// finds the room's old place. One writer at a time; readers use the Lists it returns.
type Index struct {
	mu        sync.Mutex
	blockSize int
	byCode    map[string]*domain.Room
	list      *List
}

// New returns an empty index.
func New() *Index { return newIndex(defaultBlockSize) }

func newIndex(blockSize int) *Index {
	return &Index{blockSize: blockSize, byCode: map[string]*domain.Room{}, list: &List{}}
}

// fold gives r its search text, reusing old's when the name is the same (a room's name does
// not change, so folding happens once per room and replica).
func fold(r *domain.Room, old *domain.Room) {
	if old != nil && old.Name == r.Name {
		r.Search = old.Search
		return
	}
	r.Search = domain.FoldName(r.Name)
}

// Load replaces the index with rooms (in any order) and returns the new List.
func (x *Index) Load(rooms []domain.Room) *List {
	x.mu.Lock()
	defer x.mu.Unlock()
	byCode := make(map[string]*domain.Room, len(rooms))
	all := make([]domain.Room, len(rooms))
	copy(all, rooms)
	ptrs := make([]*domain.Room, len(all))
	for i := range all {
		r := &all[i]
		fold(r, x.byCode[r.Code])
		byCode[r.Code] = r
		ptrs[i] = r
	}
	slices.SortFunc(ptrs, byActivity)
	l := &List{n: len(ptrs)}
	for len(ptrs) > 0 {
		n := min(len(ptrs), x.blockSize)
		l.blocks = append(l.blocks, newBlock(ptrs[:n:n]))
		ptrs = ptrs[n:]
	}
	x.byCode, x.list = byCode, l
	return l
}

func byActivity(a, b *domain.Room) int { return domain.ByActivity(*a, *b) }

// Apply brings the index up to date and returns the new List: the rooms named by codes are
// replaced by their current state in changed (a code missing from changed was removed),
// and rooms last active before cutoff (ms) are dropped.
func (x *Index) Apply(codes []string, changed []domain.Room, cutoff int64) *List {
	x.mu.Lock()
	defer x.mu.Unlock()
	old := x.list
	// Every edit lands in the block (of the old list) that holds the room's old place or
	// the new room's place; the edited blocks are rebuilt, the others shared.
	type edit struct {
		drop map[string]bool
		add  []*domain.Room
	}
	edits := map[int]*edit{}
	editOf := func(bi int) *edit {
		e := edits[bi]
		if e == nil {
			e = &edit{drop: map[string]bool{}}
			edits[bi] = e
		}
		return e
	}
	for _, c := range codes {
		r := x.byCode[c]
		if r == nil {
			continue
		}
		bi, _ := old.at(domain.Position{LastActivity: r.LastActivity, Code: r.Code})
		editOf(bi).drop[c] = true
	}
	fresh := make([]*domain.Room, 0, len(changed))
	for i := range changed {
		r := new(domain.Room)
		*r = changed[i]
		if r.LastActivity < cutoff {
			continue
		}
		fold(r, x.byCode[r.Code])
		fresh = append(fresh, r)
	}
	for _, c := range codes {
		delete(x.byCode, c)
	}
	for _, r := range fresh {
		x.byCode[r.Code] = r
		bi, _ := old.at(domain.Position{LastActivity: r.LastActivity, Code: r.Code})
		// A room after the last block's last room goes at the end of the last block.
		bi = min(bi, max(len(old.blocks)-1, 0))
		e := editOf(bi)
		e.add = append(e.add, r)
	}
	blocks := make([]*block, 0, len(old.blocks)+len(edits)+1)
	dirty := make([]bool, 0, cap(blocks))
	push := func(rooms []*domain.Room) {
		// An edited block holds 0 to blockSize+len(changed) rooms: split it evenly.
		for parts := (len(rooms) + x.blockSize - 1) / x.blockSize; parts > 0; parts-- {
			n := (len(rooms) + parts - 1) / parts
			blocks = append(blocks, newBlock(rooms[:n:n]))
			dirty = append(dirty, true)
			rooms = rooms[n:]
		}
	}
	for bi := 0; bi < max(len(old.blocks), 1); bi++ {
		e := edits[bi]
		if e == nil {
			if bi < len(old.blocks) {
				blocks, dirty = append(blocks, old.blocks[bi]), append(dirty, false)
			}
			continue
		}
		var prev []*domain.Room
		if bi < len(old.blocks) {
			prev = old.blocks[bi].rooms
		}
		slices.SortFunc(e.add, byActivity)
		rooms := make([]*domain.Room, 0, len(prev)+len(e.add))
		j := 0
		for _, r := range prev {
			if e.drop[r.Code] {
				continue
			}
			for j < len(e.add) && byActivity(e.add[j], r) < 0 {
				rooms = append(rooms, e.add[j])
				j++
			}
			rooms = append(rooms, r)
		}
		push(append(rooms, e.add[j:]...))
	}
	blocks = x.compact(blocks, dirty)
	l := &List{blocks: blocks}
	for _, b := range blocks {
		l.n += len(b.rooms)
	}
	l = x.trim(l, cutoff)
	x.list = l
	return l
}

// compact merges each rebuilt block holding less than a quarter of blockSize into the block
// after it (splitting the pair evenly when together they are too many), so that blocks do
// not wear down to slivers under churn. Only rebuilt blocks are looked at: the cost stays
// with what changed.
func (x *Index) compact(blocks []*block, dirty []bool) []*block {
	out := blocks[:0]
	for i := 0; i < len(blocks); i++ {
		b := blocks[i]
		if !dirty[i] || len(b.rooms) >= x.blockSize/4 || i+1 == len(blocks) {
			out = append(out, b)
			continue
		}
		rooms := append(slices.Clip(b.rooms), blocks[i+1].rooms...)
		i++
		if len(rooms) <= x.blockSize {
			out = append(out, newBlock(slices.Clip(rooms)))
			continue
		}
		h := len(rooms) / 2
		out = append(out, newBlock(rooms[:h:h]), newBlock(slices.Clip(rooms[h:])))
	}
	return out
}

// trim drops the rooms last active before cutoff (ms): they are l's tail.
func (x *Index) trim(l *List, cutoff int64) *List {
	if last := l.Last(); last == nil || last.LastActivity >= cutoff {
		return l
	}
	bi, i := l.seek(func(r *domain.Room) bool { return r.LastActivity >= cutoff })
	out := &List{blocks: slices.Clip(l.blocks[:bi])}
	if i > 0 {
		b := l.blocks[bi]
		out.blocks = append(out.blocks, &block{rooms: b.rooms[:i:i], text: b.text[:b.ends[i-1]], ends: b.ends[:i:i]})
	}
	for _, b := range l.blocks[bi:] {
		for _, r := range b.rooms[i:] {
			delete(x.byCode, r.Code)
		}
		i = 0
	}
	for _, b := range out.blocks {
		out.n += len(b.rooms)
	}
	return out
}
