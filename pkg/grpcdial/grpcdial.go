// Package grpcdial is how every Vigil gRPC client dials a backend: keepalive pings that notice
// a peer which stops answering without closing anything (a paused container, a partition, a
// NAT that dropped the connection's state), round robin over every address the backend's name
// resolves to, passing over one whose calls have stopped being answered until keepalive
// notices it (BalancerName), and a DNS resolver that looks the name up again periodically, so
// replicas added or removed by scaling are used or dropped without a restart.
//
//	conn, err := grpcdial.New("room:7005", creds) // dns:///room:7005, stall-aware round robin, keepalive
//
// The servers' side (pkg/server) permits these pings: its enforcement MinTime is below
// KeepaliveTime, so no client is sent GOAWAY for pinging too often.
package grpcdial

import (
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

const (
	// KeepaliveTime is how long a connection may read nothing before the client pings its
	// peer. 10s is gRPC-Go's floor for clients: shorter values are raised to it.
	KeepaliveTime = 10 * time.Second
	// KeepaliveTimeout is how long a ping may go unanswered before the connection is closed
	// and every call and stream on it fails UNAVAILABLE. A silent peer is thus noticed at
	// most KeepaliveTime+KeepaliveTimeout (15s) after it last sent anything.
	KeepaliveTimeout = 5 * time.Second
	// RefreshInterval is how often a DNS name is looked up again while the connection lives
	// (and at most once a second more when a connection to one of its addresses fails).
	RefreshInterval = 10 * time.Second
)

// New dials target with DialOptions first and opts after (opts win where they overlap: a
// test's own keepalive, say). A bare host:port becomes dns:///host:port (see Target). The
// connection is lazy, as grpc.NewClient's: nothing is dialed before the first call.
func New(target string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	return grpc.NewClient(Target(target), append(DialOptions(), opts...)...)
}

// DialOptions are the options New adds: client keepalive, the refreshing DNS resolver for
// dns:/// targets, and round robin that passes over a replica whose calls stopped being
// answered (BalancerName) as the default service config.
func DialOptions() []grpc.DialOption {
	return append(balancing(), grpc.WithKeepaliveParams(ClientParameters()), grpc.WithResolvers(newBuilder(RefreshInterval, nil)))
}

// balancing is the default service config and the interceptor that marks unary calls for
// the picker.
func balancing() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithDefaultServiceConfig(serviceConfig), grpc.WithChainUnaryInterceptor(markUnary)}
}

// ClientParameters are the keepalive parameters of every Vigil client. PermitWithoutStream:
// an idle connection is checked too, so the first call after a silent failure does not find it.
func ClientParameters() keepalive.ClientParameters {
	return keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout, PermitWithoutStream: true}
}

// Target is addr as a gRPC target: unchanged when it names a scheme (dns:///, unix:,
// passthrough:///, a test's manual resolver), else dns:///addr.
func Target(addr string) string {
	if strings.Contains(addr, "://") || strings.HasPrefix(addr, "unix:") || strings.HasPrefix(addr, "unix-abstract:") {
		return addr
	}
	return "dns:///" + addr
}
