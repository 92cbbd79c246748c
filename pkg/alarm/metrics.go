package alarm

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	alarmLateness = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vigil_alarm_lateness_seconds",
		Help:    "How late alarms were claimed after their due time.",
		Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"ns"})
	alarmClaimed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vigil_alarms_claimed_total", Help: "Alarms claimed by a scheduler (retries included).",
	}, []string{"ns"})
	alarmAcked = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vigil_alarms_acked_total", Help: "Alarms whose handler succeeded.",
	}, []string{"ns"})
	alarmRetried = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vigil_alarms_retried_total", Help: "Alarms whose handler failed and that will be retried.",
	}, []string{"ns"})
	alarmRefired = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vigil_alarms_refired_total",
		Help: "Alarms claimed again after an earlier attempt: retries after a failure plus leases that ran out (a crashed or stuck scheduler). Lease expiries = refired - retried.",
	}, []string{"ns"})
	alarmDead = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vigil_alarms_dead_lettered_total", Help: "Alarms moved to the dead-letter set after their last retry.",
	}, []string{"ns"})
	registerOnce sync.Once
)

type queueMetrics struct {
	lateness                      prometheus.Observer
	claimed, acked, retried, dead prometheus.Counter
	refired                       prometheus.Counter
}

func metricsFor(ns string) *queueMetrics {
	registerOnce.Do(func() {
		prometheus.MustRegister(alarmLateness, alarmClaimed, alarmAcked, alarmRetried, alarmRefired, alarmDead)
	})
	return &queueMetrics{
		lateness: alarmLateness.WithLabelValues(ns),
		claimed:  alarmClaimed.WithLabelValues(ns),
		acked:    alarmAcked.WithLabelValues(ns),
		retried:  alarmRetried.WithLabelValues(ns),
		dead:     alarmDead.WithLabelValues(ns),
		refired:  alarmRefired.WithLabelValues(ns),
	}
}
