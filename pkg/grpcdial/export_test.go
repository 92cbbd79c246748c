package grpcdial

import (
	"encoding/json"
	"fmt"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/serviceconfig"
)

// observedBalancerName is BalancerName registered under a name of its own whose builds hand
// their picker builder to the test (on observedBuilds), so a test can read what the picker
// keeps for a connection it made.
const observedBalancerName = "vigil_round_robin_observed"

var observedBuilds = make(chan *pickerBuilder, 16)

func init() { balancer.Register(observedBuilder{}) }

type observedBuilder struct{}

func (observedBuilder) Name() string { return observedBalancerName }

func (observedBuilder) ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	return stallAwareBuilder{}.ParseConfig(js)
}

func (observedBuilder) Build(cc balancer.ClientConn, o balancer.BuildOptions) balancer.Balancer {
	b := stallAwareBuilder{}.Build(cc, o).(*stallAware)
	select {
	case observedBuilds <- b.pb:
	default:
		panic("observedBuilds is full: a test built a connection it never read")
	}
	return b
}

// retained is how many calls the picker's bookkeeping holds, over every address, counted by
// walking each address's list (and checked against its count).
func (pb *pickerBuilder) retained() (int, error) {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	total := 0
	for _, in := range pb.calls {
		n, err := in.retained()
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

func (in *inflight) retained() (int, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	n := 0
	for c := in.head; c != nil; c = c.next {
		n++
	}
	if n != in.open {
		return 0, fmt.Errorf("%d calls in the list, %d counted open", n, in.open)
	}
	return n, nil
}
