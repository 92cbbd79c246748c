// Package backend is how the gateway reaches the domain services: one gRPC client connection
// per backend, to every address a backend's configuration names.
package backend

import (
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
)

// Target turns a comma-separated list of host:port addresses into a gRPC target that balances
// calls round-robin over all of them (scheme "vigil-list", resolved by the resolver Dial
// installs on that connection only); one address, or any target with a scheme
// ("dns:///chat:7003"), is returned unchanged. With several chat replicas, a room whose
// stream breaks re-attaches to another listed replica.
func Target(addr string) string {
	if !strings.Contains(addr, ",") || strings.Contains(addr, "://") {
		return addr
	}
	return listScheme + ":///" + addr
}

const listScheme = "vigil-list"

// withListResolver resolves "vigil-list:///a:1,b:2" on one connection, without registering the
// scheme for the whole process.
func withListResolver() grpc.DialOption { return grpc.WithResolvers(listResolverBuilder{}) }

// listResolverBuilder resolves "vigil-list:///a:1,b:2" to those addresses, round-robin.
type listResolverBuilder struct{}

func (listResolverBuilder) Scheme() string { return listScheme }

func (listResolverBuilder) Build(t resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	var addrs []resolver.Address
	for _, a := range strings.Split(t.Endpoint(), ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, resolver.Address{Addr: a})
		}
	}
	sc := cc.ParseServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`)
	if err := cc.UpdateState(resolver.State{Addresses: addrs, ServiceConfig: sc}); err != nil {
		return nil, err
	}
	return listResolver{}, nil
}

type listResolver struct{}

func (listResolver) ResolveNow(resolver.ResolveNowOptions) {}
func (listResolver) Close()                                {}
