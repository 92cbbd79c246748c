package service

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
	"github.com/vigil-dev/vigil/pkg/prom/promtest"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// start runs a chat replica on the test's Redis prefix until the test ends.
func start(t *testing.T, prefix string, o Options) *servertest.Running {
	t.Helper()
	o.Redis = redisx.Config{URL: redistest.URL(t)}
	o.Prefix = prefix
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return servertest.StartService(t, "chat", New, o)
}

func client(t *testing.T, addr string) chatv1.ChatServiceClient {
	t.Helper()
	return chatv1.NewChatServiceClient(servertest.Dial(t, addr))
}

// replicaClient is a client of a new replica (start) on a key prefix of the test's own.
func replicaClient(t *testing.T, o Options) chatv1.ChatServiceClient {
	t.Helper()
	return client(t, start(t, redistest.Prefix(t), o).Addr)
}

// Every metric family the service documents (docs/OPERATIONS.md) is registered on the
// Registerer it is given, none on the process's default registry only.
func TestEveryMetricOnTheGivenRegisterer(t *testing.T) {
	t.Parallel()
	servertest.CheckRegisterer(t, func(ctx context.Context, core server.Core) (server.Service, error) {
		return New(ctx, Options{Core: core})
	}, promtest.ServerFamilies...)
}

// connect opens a stream, joins room and returns the stream and its History.
func connect(t *testing.T, c chatv1.ChatServiceClient, room string, since *int64) (chatv1.ChatService_ConnectClient, *chatv1.History) {
	t.Helper()
	s, h, _ := openStream(t, c, &chatv1.Join{Room: room, Since: since})
	return s, h
}

// openStream opens a Connect stream, sends join and returns the stream with its History;
// cancel ends the stream as a broken connection would (so does the test's end).
func openStream(t *testing.T, c chatv1.ChatServiceClient, join *chatv1.Join) (chatv1.ChatService_ConnectClient, *chatv1.History, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := c.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&chatv1.ConnectRequest{Kind: &chatv1.ConnectRequest_Join{Join: join}}); err != nil {
		t.Fatal(err)
	}
	first := recv(t, s)
	h := first.GetHistory()
	if h == nil {
		t.Fatalf("first response = %v, want a history", first)
	}
	return s, h, cancel
}

func recv(t *testing.T, s chatv1.ChatService_ConnectClient) *chatv1.ConnectResponse {
	t.Helper()
	type result struct {
		r   *chatv1.ConnectResponse
		err error
	}
	ch := make(chan result, 1)
	go func() {
		r, err := s.Recv()
		ch <- result{r, err}
	}()
	select {
	case res := <-ch:
		if res.err != nil {
			t.Fatalf("Recv = %v", res.err)
		}
		return res.r
	case <-time.After(wait.Deadline):
		t.Fatalf("nothing received within %v", wait.Deadline)
	}
	return nil
}

func postOn(t *testing.T, s chatv1.ChatService_ConnectClient, ref, body string) {
	t.Helper()
	err := s.Send(&chatv1.ConnectRequest{Kind: &chatv1.ConnectRequest_Post{Post: &chatv1.Post{Ref: ref, UserId: "u1", User: "Ann", Body: body}}})
	if err != nil {
		t.Fatal(err)
	}
}

func TestConnectPostsAndHistory(t *testing.T) {
	t.Parallel()
	c := replicaClient(t, Options{})
	s, h := connect(t, c, "room-a", nil)
	if len(h.GetMessages()) != 0 || h.GetLastId() != 0 || h.GetJoinLimit() != 50 {
		t.Fatalf("history of a new room = %v, want empty, last 0, join limit 50", h)
	}
	postOn(t, s, "r1", "hello")
	// The post's result and the message itself both arrive, in either order.
	var gotResult, gotMsg bool
	for range 2 {
		res := recv(t, s)
		switch {
		case res.GetPostResult() != nil:
			if pr := res.GetPostResult(); pr.GetRef() != "r1" || pr.GetId() != 1 || pr.GetError() != "" {
				t.Fatalf("post result = %v, want ref r1 id 1", pr)
			}
			gotResult = true
		case res.GetMessage() != nil:
			if m := res.GetMessage(); m.GetId() != 1 || m.GetBody() != "hello" || m.GetUser() != "Ann" || m.GetUserId() != "u1" {
				t.Fatalf("message = %v, want id 1 hello from Ann", m)
			}
			gotMsg = true
		}
	}
	if !gotResult || !gotMsg {
		t.Fatalf("got result %v, message %v; want both", gotResult, gotMsg)
	}
	// A bad post is refused on the stream, which stays open.
	postOn(t, s, "r2", "")
	if pr := recv(t, s).GetPostResult(); pr.GetRef() != "r2" || pr.GetError() == "" || pr.GetId() != 0 {
		t.Fatalf("bad post result = %v, want an error", pr)
	}
	ctx := context.Background()
	res, err := c.PostMessage(ctx, &chatv1.PostMessageRequest{Room: "room-a", UserId: "u2", Body: "unary"})
	if err != nil || res.GetMessage().GetId() != 2 || res.GetMessage().GetUser() != "anonymous" || res.GetMessage().GetUserId() != "u2" {
		t.Fatalf("PostMessage = %v, %v; want id 2 by u2, named anonymous (no username given)", res, err)
	}
	if m := recv(t, s).GetMessage(); m.GetId() != 2 || m.GetBody() != "unary" {
		t.Fatalf("stream got %v, want the unary post id 2", m)
	}
	list, err := c.ListMessages(ctx, &chatv1.ListMessagesRequest{Room: "room-a"})
	if err != nil || len(list.GetMessages()) != 2 || list.GetLastId() != 2 {
		t.Fatalf("ListMessages = %v, %v; want 2 messages, last id 2", list, err)
	}
	_, h2 := connect(t, c, "room-a", nil)
	if len(h2.GetMessages()) != 2 || h2.GetLastId() != 2 {
		t.Fatalf("second member's history = %v, want both messages", h2)
	}
}

func TestConnectRules(t *testing.T) {
	t.Parallel()
	c := replicaClient(t, Options{})
	ctx := context.Background()
	s, err := c.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Send(&chatv1.ConnectRequest{Kind: &chatv1.ConnectRequest_Post{Post: &chatv1.Post{Body: "x"}}})
	if _, err := s.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("post before join = %v, want InvalidArgument", err)
	}
	s, err = c.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Send(&chatv1.ConnectRequest{Kind: &chatv1.ConnectRequest_Join{Join: &chatv1.Join{Room: "bad\nroom"}}})
	if _, err := s.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("join of a bad room name = %v, want InvalidArgument", err)
	}
	if _, err := c.PostMessage(ctx, &chatv1.PostMessageRequest{Room: "room-a", UserId: "u", Body: string(make([]byte, 4097))}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("PostMessage of 4097 characters = %v, want InvalidArgument", err)
	}
	// A room's name is any UTF-8 of 1-128 bytes without control characters, and keys stay in
	// one slot whatever it holds; a post without a user id gets a UUID.
	for _, room := range []string{"NOPE", "orders/42", "Order:42", "日報", "{team}", "a}b{c", "100%"} {
		res, err := c.PostMessage(ctx, &chatv1.PostMessageRequest{Room: room, Username: "익명", Body: "hi " + room})
		if err != nil || res.GetMessage().GetId() != 1 || uuid.Validate(res.GetMessage().GetUserId()) != nil {
			t.Errorf("PostMessage(room %q, no user id) = %v, %v; want id 1 and a UUID user id", room, res, err)
			continue
		}
		list, err := c.ListMessages(ctx, &chatv1.ListMessagesRequest{Room: room})
		if err != nil || len(list.GetMessages()) != 1 || list.GetMessages()[0].GetBody() != "hi "+room {
			t.Errorf("ListMessages(%q) = %v, %v; want its one message", room, list, err)
		}
	}
	for _, bad := range []*chatv1.PostMessageRequest{
		{Room: string(make([]byte, 129)), Body: "x"},
		{Room: strings.Repeat("r", 129), Body: "x"},
		{Room: "ok", Username: strings.Repeat("익", 65), Body: "x"},
		{Room: "ok", UserId: "a\tb", Body: "x"},
	} {
		if _, err := c.PostMessage(ctx, bad); status.Code(err) != codes.InvalidArgument {
			t.Errorf("PostMessage(%.40q…) = %v, want InvalidArgument", bad.String(), err)
		}
	}
	for _, id := range []int64{1 << 53, 1e17, -1} {
		if _, err := c.ListMessages(ctx, &chatv1.ListMessagesRequest{Room: "ok", Since: &id}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("ListMessages(since %d) = %v, want InvalidArgument", id, err)
		}
		if _, err := c.ListMessages(ctx, &chatv1.ListMessagesRequest{Room: "ok", Before: &id}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("ListMessages(before %d) = %v, want InvalidArgument", id, err)
		}
	}
	// A repeated post id is stored once.
	p := &chatv1.PostMessageRequest{Room: "room-a", UserId: "u", Body: "once", PostId: "p-1"}
	a, err1 := c.PostMessage(ctx, p)
	b, err2 := c.PostMessage(ctx, p)
	if err1 != nil || err2 != nil || a.GetMessage().GetId() != b.GetMessage().GetId() {
		t.Errorf("repeated post ids = %v/%v, %v/%v; want the same id", a, err1, b, err2)
	}
}

func TestResumeSince(t *testing.T) {
	t.Parallel()
	c := replicaClient(t, Options{HistoryKeep: 10, HistoryOnJoin: 3})
	ctx := context.Background()
	for i := 1; i <= 12; i++ {
		if _, err := c.PostMessage(ctx, &chatv1.PostMessageRequest{Room: "room-a", UserId: "u", Body: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	_, h := connect(t, c, "room-a", nil)
	if ids := idsOf(h.GetMessages()); fmt.Sprint(ids) != "[10 11 12]" || h.GetJoinLimit() != 3 {
		t.Errorf("join history = %v (limit %d), want [10 11 12] (3)", ids, h.GetJoinLimit())
	}
	since := int64(8)
	_, h = connect(t, c, "room-a", &since)
	if ids := idsOf(h.GetMessages()); fmt.Sprint(ids) != "[9 10 11 12]" || h.GetTruncated() {
		t.Errorf("since 8 = %v truncated %v, want [9 10 11 12], not truncated", ids, h.GetTruncated())
	}
	since = 1 // 2 was trimmed: only 3..12 are kept
	_, h = connect(t, c, "room-a", &since)
	if ids := idsOf(h.GetMessages()); len(ids) != 10 || ids[0] != 3 || !h.GetTruncated() {
		t.Errorf("since 1 = %v truncated %v, want 3..12, truncated", ids, h.GetTruncated())
	}
}

func idsOf(msgs []*chatv1.ChatMessage) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.GetId()
	}
	return out
}

// TestTwoReplicasFanOut: streams on two replicas see every message once, in the same order.
func TestTwoReplicasFanOut(t *testing.T) {
	t.Parallel()
	prefix := redistest.Prefix(t)
	a, b := start(t, prefix, Options{}), start(t, prefix, Options{})
	ca, cb := client(t, a.Addr), client(t, b.Addr)
	sa, _ := connect(t, ca, "room-a", nil)
	sb, _ := connect(t, cb, "room-a", nil)
	ctx := context.Background()
	const n = 40
	errc := make(chan error, 2)
	for _, c := range []chatv1.ChatServiceClient{ca, cb} {
		go func() {
			for i := range n / 2 {
				if _, err := c.PostMessage(ctx, &chatv1.PostMessageRequest{Room: "room-a", UserId: "u", Body: fmt.Sprint(i)}); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []chatv1.ChatService_ConnectClient{sa, sb} {
		for want := int64(1); want <= n; want++ {
			if m := recv(t, s).GetMessage(); m.GetId() != want {
				t.Fatalf("got %v, want id %d", m, want)
			}
		}
	}
}

// TestShutdownEndsStreams: a replica that stops ends its streams at once with UNAVAILABLE, so
// its drain does not wait for them and clients resume elsewhere.
func TestShutdownEndsStreams(t *testing.T) {
	t.Parallel()
	// A drain far longer than the test's own deadline: if the open stream held the drain,
	// Serve would not return in time.
	r := start(t, redistest.Prefix(t), Options{Core: server.Core{DrainTimeout: time.Hour}})
	s, _ := connect(t, client(t, r.Addr), "room-a", nil)
	r.Cancel()
	if _, err := s.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("Recv after shutdown = %v, want Unavailable", err)
	}
	r.Drain(t) // fails the test when the open stream holds the drain
}

// TestStoredPostsAreAnswered: a Connect stream that ends while its member keeps posting (here
// the replica shuts down) answers every post it stored before the stream's end, and stores
// none after: the room's log holds exactly the posts whose results reached the client.
func TestStoredPostsAreAnswered(t *testing.T) {
	t.Parallel()
	prefix := redistest.Prefix(t)
	for round := range 5 {
		room := fmt.Sprintf("round-%d", round)
		r := start(t, prefix, Options{})
		s, _ := connect(t, client(t, r.Addr), room, nil)
		go func() {
			for i := 0; ; i++ {
				p := &chatv1.Post{Ref: fmt.Sprint(i), PostId: fmt.Sprint(i), UserId: "u", Body: "x"}
				if s.Send(&chatv1.ConnectRequest{Kind: &chatv1.ConnectRequest_Post{Post: p}}) != nil {
					return
				}
			}
		}()
		answered := map[int64]bool{}
		for {
			res, err := s.Recv()
			if err != nil {
				if status.Code(err) != codes.Unavailable {
					t.Fatalf("round %d: stream ended with %v, want Unavailable (shutdown)", round, err)
				}
				break
			}
			if pr := res.GetPostResult(); pr != nil {
				if pr.GetError() != "" {
					t.Fatalf("round %d: post refused: %s", round, pr.GetError())
				}
				answered[pr.GetId()] = true
				if len(answered) == 20 {
					r.Cancel() // shut down while posts keep coming
				}
			}
		}
		r.Drain(t)

		// Read the log back through a fresh replica.
		list, err := client(t, start(t, prefix, Options{}).Addr).ListMessages(context.Background(),
			&chatv1.ListMessagesRequest{Room: room, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.GetMessages()) < 20 {
			t.Fatalf("round %d: %d messages stored, want at least the 20 answered", round, len(list.GetMessages()))
		}
		for _, m := range list.GetMessages() {
			if !answered[m.GetId()] {
				t.Errorf("round %d: message %d was stored but its post never answered", round, m.GetId())
			}
		}
		if len(answered) != len(list.GetMessages()) {
			t.Errorf("round %d: %d posts answered, %d stored", round, len(answered), len(list.GetMessages()))
		}
	}
}
