package transport

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/wait"
	"github.com/vigil-dev/vigil/services/locks/internal/app"
	"github.com/vigil-dev/vigil/services/locks/internal/domain"
)

// grantingStore grants every acquire with token 7, calling during first (the caller leaving as
// the grant is made), and records the releases it is asked for.
type grantingStore struct {
	app.Store
	during func()

	mu       sync.Mutex
	released []string // owner/token of each release
}

func (s *grantingStore) Acquire(ctx context.Context, resource, owner string, ttl, wait time.Duration) (domain.Acquired, error) {
	if s.during != nil {
		s.during()
	}
	return domain.Acquired{OK: true, Token: 7, ExpiresAt: time.Now().Add(ttl)}, nil
}

func (s *grantingStore) Release(_ context.Context, _, owner string, token int64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released = append(s.released, owner+"/"+strconv.FormatInt(token, 10))
	return true, nil
}

func (s *grantingStore) releases() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.released...)
}

func acquireReq(id int64) *locksv1.SessionRequest {
	return &locksv1.SessionRequest{Id: id, Call: &locksv1.SessionRequest_Acquire{
		Acquire: &locksv1.AcquireRequest{Resource: "printer", Owner: "worker-1"}}}
}

// failingStream is a Session stream whose every Send fails: the transport is gone.
type failingStream struct{ fakeStream }

func (f *failingStream) Send(*locksv1.SessionResponse) error {
	return errors.New("transport is closing")
}

// A grant whose answer cannot go out (the session's stream ended as the lock was granted, or
// the send failed) is given back by its fencing token at once: a replica resumed after a pause
// whose client gave up leaves no lock held until its TTL. A grant that goes out is kept.
func TestUndeliveredGrantIsGivenBack(t *testing.T) {
	cases := []struct {
		name      string
		stream    func(ctx context.Context, reqs chan *locksv1.SessionRequest) locksv1.LockService_SessionServer
		leaves    bool // the client leaves while the grant is made
		wantGiven bool
	}{
		{"answer sent", func(ctx context.Context, r chan *locksv1.SessionRequest) locksv1.LockService_SessionServer {
			return &fakeStream{ctx: ctx, reqs: r}
		}, false, false},
		{"client left during the grant", func(ctx context.Context, r chan *locksv1.SessionRequest) locksv1.LockService_SessionServer {
			return &fakeStream{ctx: ctx, reqs: r}
		}, true, true},
		{"send failed", func(ctx context.Context, r chan *locksv1.SessionRequest) locksv1.LockService_SessionServer {
			return &failingStream{fakeStream{ctx: ctx, reqs: r}}
		}, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			st := &grantingStore{}
			if tc.leaves {
				st.during = cancel
			}
			reqs := make(chan *locksv1.SessionRequest, 1)
			stream := tc.stream(ctx, reqs)
			_, served := serveSession(testServer(st, context.Background()), ctx, cancel, stream)
			reqs <- acquireReq(1)
			if tc.wantGiven {
				wait.Until(t, "the undelivered grant given back", func() bool { return len(st.releases()) == 1 })
				if got := st.releases()[0]; got != "worker-1/7" {
					t.Fatalf("gave back %q, want worker-1's hold with fencing token 7", got)
				}
			} else {
				wait.Until(t, "the grant answered", func() bool { return stream.(*fakeStream).answered() == 1 })
				fs := stream.(*fakeStream)
				fs.mu.Lock()
				got := fs.resps[0].GetAcquire()
				fs.mu.Unlock()
				if !got.GetAcquired() || got.GetFencingToken() != 7 {
					t.Fatalf("answer = %v, want granted with token 7", got)
				}
			}
			cancel()
			<-served
			if !tc.wantGiven {
				if got := st.releases(); len(got) != 0 {
					t.Fatalf("a delivered grant was released: %v", got)
				}
			}
		})
	}
}

// The unary Acquire gives back a grant made as its caller left (cancelled, or past its
// deadline), and answers the caller's error instead of the grant.
func TestUnaryGrantAfterTheCallerLeftIsGivenBack(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	st := &grantingStore{during: cancel}
	srv := testServer(st, context.Background())
	_, err := srv.Acquire(ctx, &locksv1.AcquireRequest{Resource: "printer", Owner: "worker-1"})
	if status.Code(err) != codes.Canceled {
		t.Fatalf("Acquire whose caller left = %v, want CANCELLED", err)
	}
	if got := st.releases(); len(got) != 1 || got[0] != "worker-1/7" {
		t.Fatalf("releases = %v, want worker-1's hold with fencing token 7 given back", got)
	}
}
