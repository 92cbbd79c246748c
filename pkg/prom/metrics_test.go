package prom

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRegisterSharesTheFirstCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	newCounter := func() *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vigil_test_total", Help: "A test counter."}, []string{"kind"})
	}
	first, err := Register(reg, newCounter())
	if err != nil {
		t.Fatal(err)
	}
	second, err := Register(reg, newCounter())
	if err != nil {
		t.Fatalf("Register of an equal collector = %v, want the first one", err)
	}
	first.WithLabelValues("a").Inc()
	second.WithLabelValues("a").Inc()
	if got := testutil.ToFloat64(first.WithLabelValues("a")); got != 2 {
		t.Errorf("shared counter = %v, want 2", got)
	}
	clash := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vigil_test_total", Help: "Other help."}, []string{"other"})
	if _, err := Register(reg, clash); err == nil {
		t.Error("Register of a clashing collector = nil, want an error")
	}
}
