// Package app holds the lobby's use cases: it validates input with the domain package, runs the
// store's transitions and applies the idle cutoff that hides and prunes abandoned rooms.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/vigil-dev/vigil/services/lobby/internal/domain"
	"github.com/vigil-dev/vigil/services/lobby/internal/store"
)

// pruneBatch bounds how many abandoned rooms one listing deletes; the rest are only hidden
// and go on later listings.
const pruneBatch = 500

// App is the lobby.
type App struct {
	st      *store.Store
	now     func() time.Time
	idleFor time.Duration // idle TTL plus grace: past it a room is hidden and pruned
	log     *slog.Logger

	// The list is cached and kept current from the lobby's change log: a listing of an
	// unchanged lobby costs one GET, and one after a few changes re-reads only the changed
	// rooms, instead of reading all 10,000. Concurrent refreshes share one read.
	loads  singleflight.Group
	mu     sync.Mutex
	cached []domain.Room // most recently active first; shared, never modified
	cursor store.Cursor
	loaded bool
	key    []byte // page tokens' HMAC key (pageKey)
	// prunedAt is when refresh last pruned idle rooms.
	prunedAt time.Time
}

// Options configure an App. Every zero value has the default given in its comment.
type Options struct {
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// IdleTTL and PruneGrace: a room not touched for their sum is hidden and pruned.
	// Defaults 1h and 5m.
	IdleTTL, PruneGrace time.Duration
	// Logger for room events. Default slog.Default().
	Logger *slog.Logger
}

// New returns the lobby on st.
func New(st *store.Store, o Options) *App {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.IdleTTL <= 0 {
		o.IdleTTL = time.Hour
	}
	if o.PruneGrace <= 0 {
		o.PruneGrace = 5 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &App{st: st, now: o.Now, idleFor: o.IdleTTL + o.PruneGrace, log: o.Logger}
}

func (a *App) cutoff() time.Time { return a.now().Add(-a.idleFor) }

// Create opens a room with a fresh code and leader token; the token is returned only here.
func (a *App) Create(ctx context.Context, name string, v *domain.Video) (domain.Room, string, error) {
	name, video, err := domain.CheckNewRoom(name, v)
	if err != nil {
		return domain.Room{}, "", err
	}
	token, hash := domain.NewLeaderToken()
	now := a.now().UnixMilli()
	for range 8 {
		r := domain.Room{Code: domain.NewCode(), Name: name, Video: video, LastActivity: now, CreatedAt: now}
		err := a.st.Create(ctx, r, hash)
		if errors.Is(err, store.ErrCodeTaken) {
			continue
		}
		if err != nil {
			return domain.Room{}, "", err
		}
		a.log.InfoContext(ctx, "room created", "event", "room_created", "code", r.Code)
		return r, token, nil
	}
	return domain.Room{}, "", errors.New("no free room code after 8 draws")
}

// List returns the open rooms, most recently active first, pruning abandoned ones, with the
// lobby's version they reflect. The slice is shared: callers must not modify it.
func (a *App) List(ctx context.Context) ([]domain.Room, int64, error) {
	v, err := a.st.Version(ctx)
	if err != nil {
		return nil, 0, err
	}
	a.mu.Lock()
	rooms, hit := a.cached, a.loaded && a.cursor.Version == v
	a.mu.Unlock()
	if hit && !idleTail(rooms, a.cutoff().UnixMilli()) {
		return rooms, v, nil
	}
	res, err, _ := a.loads.Do("list", func() (any, error) { return a.refresh(ctx) })
	if err != nil {
		return nil, 0, err
	}
	l := res.(listed)
	return l.rooms, l.version, nil
}

// listed is a refreshed list and its version.
type listed struct {
	rooms   []domain.Room
	version int64
}

// idleTail reports whether the list's oldest room has gone idle past cutoff.
func idleTail(rooms []domain.Room, cutoff int64) bool {
	return len(rooms) > 0 && rooms[len(rooms)-1].LastActivity < cutoff
}

// refresh brings the cached list up to date: it prunes rooms idle past the cutoff first (so
// the version it returns covers the pruning), then patches in the rooms the change log names,
// or reads every room when the log cannot say.
func (a *App) refresh(ctx context.Context) (listed, error) {
	cutoff := a.cutoff()
	a.mu.Lock()
	old, cur, loaded := a.cached, a.cursor, a.loaded
	// A prune is a script call: under churn every listing refreshes, so it runs when a room
	// may have gone idle (the cached tail did) or a second has passed, not on every refresh.
	prune := !loaded || idleTail(old, cutoff.UnixMilli()) || a.now().Sub(a.prunedAt) >= time.Second
	if prune {
		a.prunedAt = a.now()
	}
	a.mu.Unlock()
	if prune {
		pruned, err := a.st.Prune(ctx, cutoff, pruneBatch)
		if err != nil {
			return listed{}, err
		}
		if pruned > 0 {
			a.log.InfoContext(ctx, "idle rooms pruned", "event", "rooms_pruned", "count", pruned)
		}
	}
	var rooms []domain.Room
	complete := false
	if loaded {
		codes, next, ok, err := a.st.Changes(ctx, cur)
		if err != nil {
			return listed{}, err
		}
		if ok {
			changed, err := a.st.Rooms(ctx, codes, cutoff)
			if err != nil {
				return listed{}, err
			}
			rooms, cur, complete = patch(old, codes, changed, cutoff.UnixMilli()), next, true
		}
	}
	if !complete {
		// Rooms beyond one prune batch stay hidden here and go on later listings.
		all, next, _, err := a.st.List(ctx, cutoff)
		if err != nil {
			return listed{}, err
		}
		rooms, cur = all, next
	}
	a.mu.Lock()
	if !a.loaded || cur.Version >= a.cursor.Version {
		a.cached, a.cursor, a.loaded = rooms, cur, true
	}
	a.mu.Unlock()
	return listed{rooms: rooms, version: cur.Version}, nil
}

// patch returns a new list: old without the changed codes and without rooms idle past cutoff,
// merged with the changed rooms' current state, most recently active first (ties: the greater
// code first, as Redis orders them).
func patch(old []domain.Room, codes []string, changed []domain.Room, cutoff int64) []domain.Room {
	drop := make(map[string]bool, len(codes))
	for _, c := range codes {
		drop[c] = true
	}
	slices.SortFunc(changed, byActivity)
	out := make([]domain.Room, 0, len(old)+len(changed))
	j := 0
	for _, r := range old {
		if drop[r.Code] || r.LastActivity < cutoff {
			continue
		}
		for j < len(changed) && byActivity(changed[j], r) < 0 {
			out = append(out, changed[j])
			j++
		}
		out = append(out, r)
	}
	return append(out, changed[j:]...)
}

// byActivity orders rooms most recently active first, then by code, descending.
func byActivity(a, b domain.Room) int { return domain.ByActivity(a, b) }

// PageRequest asks for one page of the lobby.
type PageRequest struct {
	// Size is the most rooms on the page; 0 means domain.DefaultPageSize.
	Size int32
	// SizeSet is true when the caller gave a size (then it must be 1..MaxPageSize).
	SizeSet bool
	// Token continues from the previous page; "" starts at the first.
	Token string
	// Query keeps rooms whose name matches (domain.ParseQuery); "" keeps all.
	Query string
	// Joinable keeps only rooms whose leader is present.
	Joinable bool
}

// Page is one page of the lobby.
type Page struct {
	Rooms []domain.Room
	// Next is the next page's token; "" on the last page.
	Next string
	// Version is the lobby's version the page reflects.
	Version int64
}

// ListPage answers one page of the lobby, most recently active first, searched and filtered
// as asked. Bad input (a size out of range, a garbled, expired or foreign token, a query with
// control characters) is a domain.ErrInvalid with a sentence, checked before anything is read.
//
// The page is cut from the cached list (List), so it costs what List costs plus a binary
// search and a scan: a search reads names already folded when the room was loaded.
func (a *App) ListPage(ctx context.Context, req PageRequest) (Page, error) {
	size := int32(domain.DefaultPageSize)
	if req.SizeSet {
		if err := domain.CheckPageSize(req.Size); err != nil {
			return Page{}, err
		}
		size = req.Size
	}
	q, err := domain.ParseQuery(req.Query)
	if err != nil {
		return Page{}, err
	}
	filter := domain.Filter(req.Query, req.Joinable)
	key, err := a.pageKey(ctx)
	if err != nil {
		return Page{}, err
	}
	var after *domain.Position
	if req.Token != "" {
		p, err := domain.DecodePageToken(key, req.Token, filter, a.now())
		if err != nil {
			return Page{}, err
		}
		after = &p
	}
	rooms, version, err := a.List(ctx)
	if err != nil {
		return Page{}, err
	}
	start := 0
	if after != nil {
		start, _ = slices.BinarySearchFunc(rooms, *after, func(r domain.Room, p domain.Position) int {
			if p.AtOrBefore(r) {
				return -1
			}
			return 1
		})
	}
	out := make([]domain.Room, 0, min(int(size), len(rooms)-start))
	more := false
	for _, r := range rooms[start:] {
		if (req.Joinable && !r.LeaderPresent) || !q.Match(r.Search) {
			continue
		}
		if len(out) == int(size) {
			more = true
			break
		}
		out = append(out, r)
	}
	page := Page{Rooms: out, Version: version}
	if more {
		last := out[len(out)-1]
		page.Next = domain.EncodePageToken(key, domain.Position{LastActivity: last.LastActivity, Code: last.Code}, filter, a.now().Add(domain.PageTokenTTL))
	}
	return page, nil
}

// pageKey is the page tokens' key, read from the store once.
func (a *App) pageKey(ctx context.Context) ([]byte, error) {
	a.mu.Lock()
	key := a.key
	a.mu.Unlock()
	if key != nil {
		return key, nil
	}
	key, err := a.st.PageKey(ctx)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.key = key
	a.mu.Unlock()
	return key, nil
}

// Get returns one room.
func (a *App) Get(ctx context.Context, code string) (domain.Room, error) {
	if err := domain.CheckCode(code); err != nil {
		return domain.Room{}, err
	}
	return a.st.Get(ctx, code, a.cutoff())
}

// Remove drops a room; a missing room is not an error.
func (a *App) Remove(ctx context.Context, code string) (bool, error) {
	if err := domain.CheckCode(code); err != nil {
		return false, err
	}
	removed, err := a.st.Remove(ctx, code)
	if err == nil && removed {
		a.log.InfoContext(ctx, "room removed", "event", "room_removed", "code", code)
	}
	return removed, err
}

// ApplyDelta applies an occupancy delta if it is the next one.
func (a *App) ApplyDelta(ctx context.Context, code string, seq int64, viewers, leaders int32) (domain.DeltaOutcome, error) {
	if err := domain.CheckCode(code); err != nil {
		return 0, err
	}
	if err := domain.CheckSeq(seq, 1); err != nil {
		return 0, err
	}
	out, err := a.st.ApplyDelta(ctx, code, seq, viewers, leaders)
	if err == nil && out == domain.Resync {
		a.log.InfoContext(ctx, "occupancy delta out of order; resync asked", "event", "occupancy_resync", "code", code, "seq", seq)
	}
	return out, err
}

// ApplySnapshot sets the absolute occupancy unless a newer one is applied.
func (a *App) ApplySnapshot(ctx context.Context, code string, seq int64, viewers, leaders int32) (bool, error) {
	if err := domain.CheckCode(code); err != nil {
		return false, err
	}
	for _, err := range []error{domain.CheckSeq(seq, 0), domain.CheckCount("viewers", viewers), domain.CheckCount("leaders", leaders)} {
		if err != nil {
			return false, err
		}
	}
	return a.st.ApplySnapshot(ctx, code, seq, viewers, leaders)
}

// Touch raises a room's last activity.
func (a *App) Touch(ctx context.Context, code string, at int64) error {
	if err := domain.CheckCode(code); err != nil {
		return err
	}
	if err := domain.CheckTime("at", at); err != nil {
		return err
	}
	return a.st.Touch(ctx, code, time.UnixMilli(at))
}

// VerifyToken reports whether token is the room's leader token, with the room.
func (a *App) VerifyToken(ctx context.Context, code, token string) (bool, domain.Room, error) {
	r, err := a.Get(ctx, code)
	if err != nil {
		return false, domain.Room{}, err
	}
	hash, err := a.st.TokenHash(ctx, code)
	if err != nil {
		return false, domain.Room{}, fmt.Errorf("verify token: %w", err)
	}
	return domain.TokenMatches(token, hash), r, nil
}
