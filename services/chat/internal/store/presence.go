package store

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/services/chat/internal/domain"
)

// Presence: who is in a room. Each session (a member's socket, announced by its gateway) is
// open under a lease in the room's sessions; a user id with an open session is a member. The
// scripts (presence_lib.lua prepended to each) close lapsed sessions before they do anything
// else, so whichever replica touches a room sweeps it, and every arrival and departure gets the
// next presence version in the same step; the script returns them and the store publishes them
// on the room's channel once the call succeeded (runPresence).

var (
	//go:embed presence_lib.lua
	presenceLibSrc string
	//go:embed enter.lua
	enterSrc string
	//go:embed exit.lua
	exitSrc string
	//go:embed renew.lua
	renewSrc string
	//go:embed presence.lua
	presenceSrc string
)

// presenceScripts are the presence scripts, each with presence_lib.lua prepended.
type presenceScripts struct {
	enter, exit, renew, read *redisx.Script
}

func newPresenceScripts() presenceScripts {
	return presenceScripts{
		enter: redisx.NewScript("enter.lua", presenceLibSrc+enterSrc),
		exit:  redisx.NewScript("exit.lua", presenceLibSrc+exitSrc),
		renew: redisx.NewScript("renew.lua", presenceLibSrc+renewSrc),
		read:  redisx.NewScript("presence.lua", presenceLibSrc+presenceSrc),
	}
}

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// runPresence runs a presence script, then publishes the changes it announced (the last element
// of its reply), in order in one pipeline, and returns the reply without them. A publish that
// fails is logged: subscribers read the whole presence at their next gap or resync.
func (s *Store) runPresence(ctx context.Context, sc *redisx.Script, k roomKeys, args ...any) ([]any, error) {
	res, err := sc.Run(ctx, s.rdb, k.presence, args...).Slice()
	if err != nil {
		return nil, err
	}
	if len(res) == 0 {
		return nil, errCorrupt
	}
	changes, err := strings2(res[len(res)-1])
	if err != nil {
		return nil, err
	}
	if len(changes) > 0 {
		if err := s.publish(ctx, k.presence[0], k.channel, changes...); err != nil {
			s.log.Warn("presence changed but not published; subscribers read the presence at their next gap",
				"event", "chat_publish_failed", "channel", k.channel, "changes", len(changes), "err", err)
		}
	}
	return res[:len(res)-1], nil
}

// int64s reads a reply of integers.
func int64s(res []any) ([]int64, bool) {
	out := make([]int64, len(res))
	for i, v := range res {
		n, ok := v.(int64)
		if !ok {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

// Enter opens a validated session held by holder (its stream's token) until leaseEnd, or
// re-attaches it when it is open for the same user (resumed: nothing announced). It fails with
// domain.ErrSessionTaken when the session id is open for another user.
func (s *Store) Enter(ctx context.Context, room string, sess domain.Session, holder string, now, leaseEnd time.Time) (resumed bool, err error) {
	k := s.keys(room)
	reply, err := s.runPresence(ctx, s.presence.enter, k, k.channel, ms(now), sess.ID, sess.UserID, sess.Username, holder, ms(leaseEnd))
	if err != nil {
		return false, fmt.Errorf("chat enter: %w", err)
	}
	res, ok := int64s(reply)
	if !ok || len(res) != 1 {
		return false, fmt.Errorf("chat enter: unexpected reply %v", res)
	}
	switch res[0] {
	case 1:
		return false, nil
	case 0:
		return true, nil
	default:
		return false, domain.ErrSessionTaken
	}
}

// Exit closes a session while holder holds it ("": whoever does); closed is false when it was
// not open (or another stream holds it).
func (s *Store) Exit(ctx context.Context, room, session, holder string, now time.Time) (closed bool, err error) {
	k := s.keys(room)
	reply, err := s.runPresence(ctx, s.presence.exit, k, k.channel, ms(now), session, holder)
	if err != nil {
		return false, fmt.Errorf("chat exit: %w", err)
	}
	res, ok := int64s(reply)
	if !ok || len(res) != 1 {
		return false, fmt.Errorf("chat exit: unexpected reply %v", res)
	}
	return res[0] == 1, nil
}

// Renew sweeps the room and extends the leases of holder's sessions to leaseEnd. missing are
// the sessions no longer open (their lease ended first); moved those another stream holds now.
func (s *Store) Renew(ctx context.Context, room, holder string, sessions []string, now, leaseEnd time.Time) (missing, moved []string, err error) {
	k := s.keys(room)
	args := make([]any, 0, 4+len(sessions))
	args = append(args, k.channel, ms(now), ms(leaseEnd), holder)
	for _, id := range sessions {
		args = append(args, id)
	}
	res, err := s.runPresence(ctx, s.presence.renew, k, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("chat renew: %w", err)
	}
	if len(res) != 2 {
		return nil, nil, fmt.Errorf("chat renew: unexpected reply %v", res)
	}
	if missing, err = strings2(res[0]); err == nil {
		moved, err = strings2(res[1])
	}
	if err != nil {
		return nil, nil, fmt.Errorf("chat renew: unexpected reply %v", res)
	}
	return missing, moved, nil
}

func strings2(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, errCorrupt
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, errCorrupt
		}
		out = append(out, s)
	}
	return out, nil
}

// Presence sweeps the room and reads its members, in order of arrival, and presence version.
func (s *Store) Presence(ctx context.Context, room string, now time.Time) (domain.Presence, error) {
	k := s.keys(room)
	res, err := s.runPresence(ctx, s.presence.read, k, k.channel, ms(now))
	if err != nil {
		return domain.Presence{}, fmt.Errorf("chat presence: %w", err)
	}
	if len(res) != 2 {
		return domain.Presence{}, fmt.Errorf("chat presence: unexpected reply %v", res)
	}
	v, ok := res[0].(int64)
	flat, err2 := strings2(res[1])
	if !ok || err2 != nil || len(flat)%2 != 0 {
		return domain.Presence{}, fmt.Errorf("chat presence: unexpected reply %v", res)
	}
	p := domain.Presence{Version: v, Members: make([]domain.Member, 0, len(flat)/2)}
	for i := 0; i < len(flat); i += 2 {
		m, err := decodeMember(flat[i], flat[i+1])
		if err != nil {
			return domain.Presence{}, err
		}
		p.Members = append(p.Members, m)
	}
	p.Sort()
	return p, nil
}

// decodeMember reads a member's value, "<arrival version> <since ms> <username>".
func decodeMember(userID, v string) (domain.Member, error) {
	parts := strings.SplitN(v, " ", 3)
	if len(parts) != 3 {
		return domain.Member{}, errCorrupt
	}
	order, err1 := strconv.ParseInt(parts[0], 10, 64)
	since, err2 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil {
		return domain.Member{}, errCorrupt
	}
	return domain.Member{UserID: userID, Username: parts[2], Since: since, Order: order}, nil
}

// decodeChange parses a published presence change: "p<version>\tj\t<user id>\t<since>\t<username>"
// or "p<version>\tl\t<user id>".
func decodeChange(payload string) (domain.Change, error) {
	f := strings.Split(payload[1:], "\t")
	if len(f) < 3 {
		return domain.Change{}, errCorrupt
	}
	v, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return domain.Change{}, errCorrupt
	}
	switch {
	case f[1] == "l" && len(f) == 3:
		return domain.Change{Version: v, Left: f[2]}, nil
	case f[1] == "j" && len(f) == 5:
		since, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return domain.Change{}, errCorrupt
		}
		return domain.Change{Version: v, Joined: &domain.Member{UserID: f[2], Username: f[4], Since: since, Order: v}}, nil
	}
	return domain.Change{}, errCorrupt
}
