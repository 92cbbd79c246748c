package backend

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// chatReplica answers PostMessage, or with stalled holds every post until its caller leaves
// (a replica that stopped answering without closing anything).
type chatReplica struct {
	chatv1.UnimplementedChatServiceServer
	stalled bool
	calls   atomic.Int64
	addr    string
}

func (r *chatReplica) PostMessage(ctx context.Context, req *chatv1.PostMessageRequest) (*chatv1.PostMessageResponse, error) {
	r.calls.Add(1)
	if r.stalled {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &chatv1.PostMessageResponse{Message: &chatv1.ChatMessage{Body: req.GetBody()}}, nil
}

func startChatReplica(t *testing.T, stalled bool) *chatReplica {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &chatReplica{stalled: stalled, addr: lis.Addr().String()}
	srv := grpc.NewServer()
	chatv1.RegisterChatServiceServer(srv, r)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return r
}

// A chat post with its idempotency key that a replica leaves unanswered is sent again to the
// other replica and answered from there, well within its deadline; one without a key is sent
// once, and waits for its deadline on the silent replica.
func TestCallsSafeToRepeatAreHedged(t *testing.T) {
	t.Parallel()
	silent, live := startChatReplica(t, true), startChatReplica(t, false)
	hedges, err := NewHedges(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := Dial(silent.addr+","+live.addr, hedges, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := chatv1.NewChatServiceClient(conn)
	post := func(id string, d time.Duration) (*chatv1.PostMessageResponse, error) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return c.PostMessage(ctx, &chatv1.PostMessageRequest{Room: "r", PostId: id, Body: "hi " + id})
	}

	// Once both connections are up, round robin puts one of two posts on the silent replica.
	var posts int64
	wait.Until(t, "a post sent to the silent replica", func() bool {
		id := fmt.Sprintf("p%d", posts)
		posts++
		res, err := post(id, 3*HedgeAfter)
		if err != nil || res.GetMessage().GetBody() != "hi "+id {
			t.Fatalf("post %s = %v, %v; want it answered by the replica that answers", id, res, err)
		}
		return silent.calls.Load() > 0
	})
	if got := live.calls.Load(); got != posts {
		t.Errorf("the answering replica got %d posts, want each of the %d once", got, posts)
	}
	// Every post the silent replica held was sent again and answered by the other one.
	counted := func(by string) float64 {
		return testutil.ToFloat64(hedges.calls.WithLabelValues(chatv1.ChatService_PostMessage_FullMethodName, by))
	}
	if got, want := counted("second"), float64(silent.calls.Load()); got != want || counted("first") != 0 || counted("neither") != 0 {
		t.Errorf("hedged posts answered by the second attempt = %v (first %v, neither %v), want %v", got, counted("first"), counted("neither"), want)
	}
	hedgedBefore := counted("second")

	// Without a key a post is not repeated: it stays where it was sent, on the silent replica
	// one time in two.
	wait.Until(t, "a post without a key sent to the silent replica", func() bool {
		before := silent.calls.Load() + live.calls.Load()
		_, err := post("", 3*HedgeAfter)
		if n := silent.calls.Load() + live.calls.Load() - before; n != 1 {
			t.Fatalf("a post without a key was sent %d times, want once", n)
		}
		if err != nil && status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("a post without a key: %v", err)
		}
		return err != nil // it waited for its deadline on the silent replica
	})
	if got := counted("second") + counted("first") + counted("neither"); got != hedgedBefore {
		t.Errorf("posts without a key counted as hedged: %v hedges, want %v", got, hedgedBefore)
	}
}
