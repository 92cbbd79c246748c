package alarmadmin

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-dev/vigil/pkg/alarm"
)

// The queue's state as gauges, read from Redis when Prometheus scrapes: how many alarms wait,
// how many are overdue, in flight or dead, and how late the oldest overdue one is. The counters
// of pkg/alarm say what a process did; these say where each queue stands, whichever replica
// is scraped.

var (
	descPending  = prometheus.NewDesc("vigil_alarms_pending", "Alarms in the queue, due or not, in flight included.", []string{"ns"}, nil)
	descOverdue  = prometheus.NewDesc("vigil_alarms_overdue", "Alarms due now or earlier and not yet handled (a lease that ran out counts).", []string{"ns"}, nil)
	descInFlight = prometheus.NewDesc("vigil_alarms_in_flight", "Alarms claimed and not yet acknowledged, or waiting for a retry.", []string{"ns"}, nil)
	descDead     = prometheus.NewDesc("vigil_alarms_dead_letters", "Dead-lettered alarms waiting for an operator (vigil alarms dead).", []string{"ns"}, nil)
	descOldest   = prometheus.NewDesc("vigil_alarm_oldest_overdue_seconds", "How late the oldest overdue alarm is; 0 when none is.", []string{"ns"}, nil)
	descUp       = prometheus.NewDesc("vigil_alarm_queue_up", "1 when the queue's state could be read at scrape time, else 0.", []string{"ns"}, nil)
)

// queueCollector reports every queue registered on one Registerer, one per namespace (the
// latest registered).
type queueCollector struct {
	mu     sync.Mutex
	queues map[string]*alarm.Queue
}

var (
	collectorsMu sync.Mutex
	// collectors holds one collector per Registerer the queues' metrics go to (alarm.Options.Metrics).
	collectors = map[prometheus.Registerer]*queueCollector{}
)

// scrapeTimeout bounds the Redis reads of one scrape.
const scrapeTimeout = 2 * time.Second

// watch adds q's state to the metrics of the Registerer q's own metrics go to.
func watch(q *alarm.Queue) {
	reg := q.Metrics()
	collectorsMu.Lock()
	c, ok := collectors[reg]
	if !ok {
		c = &queueCollector{queues: map[string]*alarm.Queue{}}
		if err := reg.Register(c); err == nil {
			collectors[reg] = c
		} else {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				if existing, ok := are.ExistingCollector.(*queueCollector); ok {
					c = existing
					collectors[reg] = c
				}
			}
		}
	}
	collectorsMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queues[q.Namespace()] = q
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPending, descOverdue, descInFlight, descDead, descOldest, descUp} {
		ch <- d
	}
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	queues := make([]*alarm.Queue, 0, len(c.queues))
	for _, q := range c.queues {
		queues = append(queues, q)
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	for _, q := range queues {
		ns := q.Namespace()
		now, shards, err := q.Inspect(ctx, 1)
		if err != nil {
			ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0, ns)
			continue
		}
		var pending, overdue, inFlight, dead int64
		var oldest time.Time
		for _, s := range shards {
			pending += s.Pending
			overdue += s.Overdue
			inFlight += s.InFlight
			dead += s.Dead
			if len(s.Next) > 0 && !s.Next[0].Due.After(now) && (oldest.IsZero() || s.Next[0].Due.Before(oldest)) {
				oldest = s.Next[0].Due
			}
		}
		late := 0.0
		if !oldest.IsZero() {
			late = now.Sub(oldest).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 1, ns)
		ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(pending), ns)
		ch <- prometheus.MustNewConstMetric(descOverdue, prometheus.GaugeValue, float64(overdue), ns)
		ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(inFlight), ns)
		ch <- prometheus.MustNewConstMetric(descDead, prometheus.GaugeValue, float64(dead), ns)
		ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, late, ns)
	}
}
