// Package prom registers Vigil's Prometheus collectors on the Registerer a component is
// given in its Options. Several components of one kind may share a Registerer (vigil dev runs
// every service in one process; tests start many), so registering a collector that is already
// there is not an error: the one registered first is used, and they count into the same series.
package prom

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg (prometheus.DefaultRegisterer when reg is nil) and returns it,
// or returns the equal collector registered there before it. Any other refusal (the same name
// with other labels or help) is an error.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if prev, ok := are.ExistingCollector.(C); ok {
				return prev, nil
			}
		}
		return c, err
	}
	return c, nil
}
