package backend

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/vigil-dev/vigil/pkg/grpcdial"
	"github.com/vigil-dev/vigil/pkg/server"
)

// CallTimeout bounds a unary call the gateway makes without a deadline of its own, so a backend
// that stops answering (a paused replica, a partition) costs a REST caller at most this long
// before a 503: under the 10 s docs/OPERATIONS.md promises.
const CallTimeout = 8 * time.Second

// DialOptions are the backend connections' credentials (tls; plaintext when unset) and message
// size limits (maxMessageBytes each way).
func DialOptions(tls server.TLS, maxMessageBytes int) ([]grpc.DialOption, error) {
	cred, err := tls.DialOption()
	if err != nil {
		return nil, err
	}
	return []grpc.DialOption{cred, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes))}, nil
}

// Dial opens the client connection of one backend: addr is an address ("room:7005", every
// address the name resolves to, looked up again every grpcdial.RefreshInterval), a
// comma-separated list of addresses, or a target with a scheme; opts are the connection's
// credentials and limits (DialOptions). Every connection has grpcdial's keepalive (a silent
// peer is noticed within KeepaliveTime+KeepaliveTimeout and its streams fail, so the socket
// kinds re-attach elsewhere), round robin over the addresses, and CallTimeout on unary calls;
// the calls it sends twice are counted in hedges (nil: not counted).
func Dial(addr string, hedges *Hedges, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	all := append(grpcdial.DialOptions(), withListResolver(), grpc.WithChainUnaryInterceptor(hedges.callTimeout),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: reconnect(), MinConnectTimeout: 5 * time.Second}))
	return grpc.NewClient(Target(addr), append(all, opts...)...)
}

// Target is the gRPC target of a backend address: a comma-separated list resolves to its
// addresses (scheme "vigil-list"); anything else is grpcdial's (a DNS name looked up again
// periodically, or a target with a scheme, unchanged).
func Target(addr string) string {
	if strings.Contains(addr, ",") && !strings.Contains(addr, "://") {
		return listScheme + ":///" + addr
	}
	return grpcdial.Target(addr)
}

// reconnect is how soon a backend connection that broke is tried again: within a second or
// two, so a replica that restarts is used as soon as it listens (gRPC's default grows to two
// minutes).
func reconnect() backoff.Config {
	return backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second}
}

// callTimeout gives a unary call without a deadline CallTimeout, and lets every unary call wait
// (within its deadline) for a replica to be ready rather than fail at once while the
// connections re-connect: with round robin a restarted replica's connection is in backoff for a
// moment, and a call then is answered once it is back, or a 503 at the deadline. A call that
// is safe to send twice is sent again when a replica leaves it unanswered (hedge).
func (h *Hedges) callTimeout(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	opts = append(opts, grpc.WaitForReady(true))
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, CallTimeout)
		defer cancel()
	}
	return h.hedge(ctx, method, req, reply, cc, invoker, opts...)
}
