// Package promtest is a private Prometheus registry for tests that ask which metric families a
// component registered, series or not: a vector with no label values yet gathers nothing, so
// Gather alone cannot tell a family that was never registered from one that is still empty.
package promtest

import (
	"regexp"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Registry is a prometheus.Registry that remembers the name of every family registered on it.
type Registry struct {
	*prometheus.Registry
	mu    sync.Mutex
	names map[string]bool
}

var _ prometheus.Registerer = (*Registry)(nil)

// NewRegistry is an empty private registry.
func NewRegistry() *Registry {
	return &Registry{Registry: prometheus.NewRegistry(), names: map[string]bool{}}
}

// fqName reads a Desc's name: the client library exposes it only through Desc.String.
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Register registers c and, when it is accepted, remembers the families it describes.
func (r *Registry) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	r.mu.Lock()
	defer r.mu.Unlock()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}
	return nil
}

// MustRegister registers every collector and panics at the first refusal.
func (r *Registry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Missing is the names of want that no registered collector describes, in want's order.
func (r *Registry) Missing(want ...string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(want), func(n string) bool { return r.names[n] })
}

// Series is every series of the family name that g gathers whose labels include all of labels
// (label name → value), in the order g gives them; none when the family has no such series.
func Series(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) []*dto.Metric {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	var out []*dto.Metric
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			has := map[string]string{}
			for _, lp := range m.GetLabel() {
				has[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if has[k] != v {
					continue series
				}
			}
			out = append(out, m)
		}
	}
	return out
}

// ServerFamilies are the families every service documents (docs/OPERATIONS.md, Metrics):
// the gRPC server's (pkg/server) and Redis's (pkg/redisx).
var ServerFamilies = []string{
	"grpc_server_handled_total", "grpc_server_handling_seconds", "vigil_grpc_shed_total",
	"vigil_redis_script_duration_seconds",
}

// AlarmFamilies are the families of a service with an alarm queue (pkg/alarm, pkg/alarmadmin).
var AlarmFamilies = []string{
	"vigil_alarm_lateness_seconds", "vigil_alarms_claimed_total", "vigil_alarms_acked_total",
	"vigil_alarms_retried_total", "vigil_alarms_dead_lettered_total", "vigil_alarms_refired_total",
	"vigil_alarms_pending", "vigil_alarms_overdue", "vigil_alarms_in_flight", "vigil_alarms_dead_letters",
	"vigil_alarm_oldest_overdue_seconds", "vigil_alarm_queue_up",
}
