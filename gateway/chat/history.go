package chat

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
)

// Joins and resumes: a joiner's history comes from the room's recent messages, or, for a
// resume older than them, from one ListMessages call, and the joiner becomes a member in the
// same step so it gets every later message exactly once.

// addMember waits for the room's first history, then sends m its history frame and makes it
// a member, atomically with respect to live messages: nothing is missed or repeated.
func (r *chatRoom) addMember(m *chatMember, since *int64) error {
	t := time.NewTimer(r.b.joinTimeout)
	defer t.Stop()
	select {
	case <-r.ready:
	case <-t.C:
		return errors.New("no history from the chat service in time")
	}
	var older []chatEntry
	fetched := false
	for attempt := 0; ; attempt++ {
		r.mu.Lock()
		entries, ok := r.historyFor(since, older, fetched)
		if !ok && attempt < 3 {
			r.mu.Unlock()
			var err error
			if older, err = r.fetchSince(*since); err != nil {
				return err
			}
			fetched = true
			continue
		}
		m.sock.Send(historyFrame(entries))
		if m.presence {
			m.sock.Send(presenceFrame(r.presentLocked()))
		}
		r.members[m] = struct{}{}
		stream := r.stream
		r.mu.Unlock()
		// Without a stream, the next one enters every member.
		if stream != nil {
			r.sendOn(stream, enterRequest(m))
		}
		return nil
	}
}

// historyFor is a joiner's history: the last joinLimit messages, or every message after since.
// ok is false when the recent list does not reach back to since and older (read from the
// service) does not bridge the gap; the entries are then the best available. Called with r.mu.
func (r *chatRoom) historyFor(since *int64, older []chatEntry, fetched bool) ([]chatEntry, bool) {
	if since == nil {
		return r.recent[max(0, len(r.recent)-r.joinLimit):], true
	}
	if *since >= r.lastID {
		return nil, true
	}
	if len(r.recent) > 0 && r.recent[0].id <= *since+1 {
		return r.recent[sortSearchEntries(r.recent, *since+1):], true
	}
	// The service may already have stored messages this room has not delivered yet: those
	// come live, so older stops at lastID.
	older = older[:sortSearchEntries(older, r.lastID+1)]
	next := *since + 1
	if len(older) > 0 {
		next = older[len(older)-1].id + 1
	}
	tail := r.recent[sortSearchEntries(r.recent, next):]
	entries := append(older[:len(older):len(older)], tail...)
	bridged := next > r.lastID || (len(r.recent) > 0 && r.recent[0].id <= next)
	// Nothing kept after since (trimmed): what the room has is all there is.
	return entries, bridged || (fetched && len(older) == 0)
}

// sortSearchEntries is the index of the first entry with id >= id.
func sortSearchEntries(entries []chatEntry, id int64) int {
	i, _ := slices.BinarySearchFunc(entries, id, func(e chatEntry, id int64) int { return cmp.Compare(e.id, id) })
	return i
}

// fetchSince reads the kept messages after since from the service, for a resume older than
// the room's recent list.
func (r *chatRoom) fetchSince(since int64) ([]chatEntry, error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.b.joinTimeout)
	defer cancel()
	res, err := r.b.client.ListMessages(ctx, &chatv1.ListMessagesRequest{Room: r.Name(), Since: &since, Limit: 1000})
	if err != nil {
		return nil, err
	}
	out := make([]chatEntry, 0, len(res.GetMessages()))
	for _, m := range res.GetMessages() {
		out = append(out, encodeChatEntry(m))
	}
	return out, nil
}

// setStream makes s the stream posts go to (nil while detached), and re-sends the posts that
// were waiting; their post ids make a repeat harmless.
