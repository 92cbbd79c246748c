package backend

import (
	"google.golang.org/grpc"

	"github.com/vigil-dev/vigil/pkg/server"
)

// DialOptions are the backend connections' credentials (tls; plaintext when unset) and message
// size limits (maxMessageBytes each way).
func DialOptions(tls server.TLS, maxMessageBytes int) ([]grpc.DialOption, error) {
	cred, err := tls.DialOption()
	if err != nil {
		return nil, err
	}
	return []grpc.DialOption{cred, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes))}, nil
}

// Dial opens the client connection of one backend: addr is Target's input (an address, a
// comma-separated list, or a target with a scheme), opts the connection's options.
func Dial(addr string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	return grpc.NewClient(Target(addr), append([]grpc.DialOption{withListResolver()}, opts...)...)
}
