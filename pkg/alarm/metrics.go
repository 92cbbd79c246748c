package alarm

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-dev/vigil/pkg/prom"
)

// queueMetrics are one queue's series of the alarm metrics.
type queueMetrics struct {
	lateness                      prometheus.Observer
	claimed, acked, retried, dead prometheus.Counter
	refired                       prometheus.Counter
}

// metricsFor registers the alarm metrics on reg (or finds them there, registered by another
// queue) and returns the series of namespace ns.
func metricsFor(reg prometheus.Registerer, ns string) (*queueMetrics, error) {
	lateness, err := prom.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vigil_alarm_lateness_seconds",
		Help:    "How late alarms were claimed after their due time.",
		Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"ns"}))
	if err != nil {
		return nil, err
	}
	counter := func(name, help string) (*prometheus.CounterVec, error) {
		return prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"ns"}))
	}
	m := &queueMetrics{lateness: lateness.WithLabelValues(ns)}
	for _, c := range []struct {
		into       *prometheus.Counter
		name, help string
	}{
		{&m.claimed, "vigil_alarms_claimed_total", "Alarms claimed by a scheduler (retries included)."},
		{&m.acked, "vigil_alarms_acked_total", "Alarms whose handler succeeded."},
		{&m.retried, "vigil_alarms_retried_total", "Alarms whose handler failed and that will be retried."},
		{&m.refired, "vigil_alarms_refired_total", "Alarms claimed again after an earlier attempt: retries after a failure plus leases that ran out (a crashed or stuck scheduler). Lease expiries = refired - retried."},
		{&m.dead, "vigil_alarms_dead_lettered_total", "Alarms moved to the dead-letter set after their last retry."},
	} {
		v, err := counter(c.name, c.help)
		if err != nil {
			return nil, err
		}
		*c.into = v.WithLabelValues(ns)
	}
	return m, nil
}
