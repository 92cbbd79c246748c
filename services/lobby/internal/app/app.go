// Package app holds the lobby's use cases: it validates input with the domain package, runs the
// store's transitions and applies the idle cutoff that hides and prunes abandoned rooms.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/vigil-dev/vigil/services/lobby/internal/domain"
	"github.com/vigil-dev/vigil/services/lobby/internal/index"
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
	idx    *index.Index // changed only by refresh
	mu     sync.Mutex
	cached *index.List // most recently active first; immutable
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
	return &App{st: st, now: o.Now, idleFor: o.IdleTTL + o.PruneGrace, log: o.Logger, idx: index.New()}
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
// lobby's version they reflect: at least the version when the call began, so a caller paging
// over several replicas never sees an older list after a newer one. The List is immutable.
func (a *App) List(ctx context.Context) (*index.List, int64, error) {
	a.mu.Lock()
	list, cur, loaded := a.cached, a.cursor, a.loaded
	a.mu.Unlock()
	var poll *store.Poll
	if loaded {
		// One round trip: the version and, when it moved, the changes since the cached list.
		p, err := a.st.Poll(ctx, cur, a.cutoff())
		if err != nil {
			return nil, 0, err
		}
		if p.Version == cur.Version && !idleTail(list, a.cutoff().UnixMilli()) {
			return list, cur.Version, nil
		}
		poll = &p
	}
	for attempt := 1; ; attempt++ {
		// Concurrent listings share one refresh; one that joined a refresh begun before its
		// own poll goes again, as that one may predate the version it saw. A refresh begun
		// after the poll reads the log to its end, so a third is never needed unless the
		// version counter and the log disagree (the log deleted by hand): then the list is as
		// new as the log can make it.
		res, err, _ := a.loads.Do("list", func() (any, error) { return a.refresh(ctx, poll) })
		if err != nil {
			return nil, 0, err
		}
		l := res.(listed)
		if poll == nil || l.version >= poll.Version || attempt == 3 {
			return l.rooms, l.version, nil
		}
	}
}

// listed is a refreshed list and its version.
type listed struct {
	rooms   *index.List
	version int64
}

// idleTail reports whether the list's oldest room has gone idle past cutoff.
func idleTail(rooms *index.List, cutoff int64) bool {
	last := rooms.Last()
	return last != nil && last.LastActivity < cutoff
}

// refresh brings the cached list up to date: it prunes rooms idle past the cutoff first (so
// the version it returns covers the pruning), then applies the rooms the change log names to
// the index, or reads every room when the log cannot say. poll, when not nil, is a caller's
// read of the log; it is used when it starts at the cached list's cursor and nothing was
// pruned since.
func (a *App) refresh(ctx context.Context, poll *store.Poll) (listed, error) {
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
			poll = nil // the prune is a change the poll did not see
		}
	}
	var rooms *index.List
	complete := false
	if loaded {
		if poll == nil || poll.From != cur {
			p, err := a.st.Poll(ctx, cur, cutoff)
			if err != nil {
				return listed{}, err
			}
			poll = &p
		}
		if poll.Complete {
			// The poll read the changed rooms too (one round trip); Apply drops any of them
			// idle past this refresh's cutoff.
			rooms, cur, complete = a.idx.Apply(poll.Codes, poll.Rooms, cutoff.UnixMilli()), poll.Next, true
		}
	}
	if !complete {
		// Rooms beyond one prune batch stay hidden here and go on later listings.
		all, next, _, err := a.st.List(ctx, cutoff)
		if err != nil {
			return listed{}, err
		}
		rooms, cur = a.idx.Load(all), next
	}
	a.mu.Lock()
	// Refreshes run one at a time (singleflight), each from the index the last one left.
	a.cached, a.cursor, a.loaded = rooms, cur, true
	a.mu.Unlock()
	return listed{rooms: rooms, version: cur.Version}, nil
}

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
	// Rooms are the index's own (immutable: read them, never change them), not copies.
	Rooms []*domain.Room
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
// search and a scan: a search looks for one word in each block's folded names
// (index.List.Page).
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
		if errors.Is(err, domain.ErrGarbledPageToken) {
			// The key kept here may be one a failover lost (this replica made it just before),
			// and the store's key another replica's since: read it again, and keep it.
			if key, err = a.reloadPageKey(ctx); err != nil {
				return Page{}, err
			}
			p, err = domain.DecodePageToken(key, req.Token, filter, a.now())
		}
		if err != nil {
			return Page{}, err
		}
		after = &p
	}
	list, version, err := a.List(ctx)
	if err != nil {
		return Page{}, err
	}
	found, more := list.Page(after, int(size), index.Query{Match: q, Joinable: req.Joinable})
	page := Page{Rooms: found, Version: version}
	if more {
		last := found[len(found)-1]
		page.Next = domain.EncodePageToken(key, domain.Position{LastActivity: last.LastActivity, Code: last.Code}, filter, a.now().Add(domain.PageTokenTTL))
	}
	return page, nil
}

// pageKey is the page tokens' key, read from the store once (again only when a token fails it).
func (a *App) pageKey(ctx context.Context) ([]byte, error) {
	a.mu.Lock()
	key := a.key
	a.mu.Unlock()
	if key != nil {
		return key, nil
	}
	return a.reloadPageKey(ctx)
}

// reloadPageKey reads the page tokens' key from the store again and keeps it.
func (a *App) reloadPageKey(ctx context.Context) ([]byte, error) {
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
