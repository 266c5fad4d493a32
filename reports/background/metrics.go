package background

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	scanned     prometheus.Counter
	evaluations *prometheus.CounterVec
	writes      *prometheus.CounterVec
	errors      *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		scanned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "regent_background_resources_scanned_total",
			Help: "Resources (or reports of resources no longer watched) the background scan looked at.",
		}),
		evaluations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regent_background_evaluations_total",
			Help: "Policy evaluations of the background scan, by outcome (accepted, rejected, error).",
		}, []string{"outcome"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regent_background_report_writes_total",
			Help: "Per-resource reports the background scan wrote, by verb (apply: created or updated; delete: left with no results).",
		}, []string{"verb"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regent_background_errors_total",
			Help: "Failures of the background scan, by reason (evaluate, write, list).",
		}, []string{"reason"}),
	}
	if reg != nil {
		m.scanned = register(reg, m.scanned)
		m.evaluations = register(reg, m.evaluations)
		m.writes = register(reg, m.writes)
		m.errors = register(reg, m.errors)
	}
	return m
}

// register registers c, or returns the collector registered before it: a replica that leads
// again starts a new scan, whose counts continue the earlier one's.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}
