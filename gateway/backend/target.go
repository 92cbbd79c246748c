// Package backend is how the gateway reaches the domain services: one gRPC client connection
// per backend, to every address a backend's configuration names.
package backend

import (
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
)

const listScheme = "vigil-list"

// withListResolver resolves "vigil-list:///a:1,b:2" on one connection, without registering the
// scheme for the whole process.
func withListResolver() grpc.DialOption { return grpc.WithResolvers(listResolverBuilder{}) }

// listResolverBuilder resolves "vigil-list:///a:1,b:2" to those addresses, balanced as every
// name is (grpcdial.BalancerName). With
// several chat replicas listed, a room whose stream breaks re-attaches to another.
type listResolverBuilder struct{}

func (listResolverBuilder) Scheme() string { return listScheme }

func (listResolverBuilder) Build(t resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	var addrs []resolver.Address
	for _, a := range strings.Split(t.Endpoint(), ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, resolver.Address{Addr: a})
		}
	}
	// No service config of its own: the connection's default (grpcdial's balancer) applies.
	if err := cc.UpdateState(resolver.State{Addresses: addrs}); err != nil {
		return nil, err
	}
	return listResolver{}, nil
}

type listResolver struct{}

func (listResolver) ResolveNow(resolver.ResolveNowOptions) {}
func (listResolver) Close()                                {}
