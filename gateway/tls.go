package gateway

import (
	"crypto/tls"
	"net"

	"google.golang.org/grpc"
)

// listener wraps lis in TLS when Security.TLS names a certificate. Only HTTP/1.1 is offered:
// WebSocket upgrades need it, and the REST API gains nothing from HTTP/2 here.
func (s *Security) listener(lis net.Listener) (net.Listener, error) {
	cfg, err := s.TLS.ServerConfig()
	if err != nil || cfg == nil {
		return lis, err
	}
	cfg.NextProtos = []string{"http/1.1"}
	return tls.NewListener(lis, cfg), nil
}

// dialOptions are the backend connections' credentials (BackendTLS, plaintext when unset) and
// message size limits.
func (s *Security) dialOptions() ([]grpc.DialOption, error) {
	cred, err := s.BackendTLS.DialOption()
	if err != nil {
		return nil, err
	}
	n := s.Limits.withDefaults(len(s.Keys) > 0).MaxMessageBytes
	return []grpc.DialOption{cred, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(n), grpc.MaxCallSendMsgSize(n))}, nil
}
