package admission

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	offered   prometheus.Counter
	dropped   prometheus.Counter
	skipped   *prometheus.CounterVec
	queued    prometheus.Counter
	coalesced prometheus.Counter
	writes    *prometheus.CounterVec
	pending   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		offered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "regent_admission_reports_offered_total",
			Help: "Policy answers the admission path handed to the report queue.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "regent_admission_reports_dropped_total",
			Help: "Policy answers dropped because the report queue was full; admission is never held back, and the background scan reports the resource later.",
		}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regent_admission_reports_skipped_total",
			Help: "Policy answers that make no report, by reason: no_uid (the object has no UID yet, e.g. a mutating webhook's CREATE), delete, operation (CONNECT), subresource, dry_run, duplicate (a request kube-apiserver sent again), undecodable.",
		}, []string{"reason"}),
		queued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "regent_admission_reports_queued_total",
			Help: "Policy answers waiting for their resource's report write (each answer once, coalesced or not).",
		}),
		coalesced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "regent_admission_reports_coalesced_total",
			Help: "Policy answers that joined a resource already waiting for its report write, so cost no write of their own.",
		}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regent_admission_reports_writes_total",
			Help: "Report writes of the admission producer by outcome: written (created or updated), unchanged (no request beyond the read), known (the last write left these very results: no request), error.",
		}, []string{"outcome"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "regent_admission_reports_pending_resources",
			Help: "Resources whose admission results wait to be written.",
		}),
	}
	for _, c := range []prometheus.Collector{m.offered, m.dropped, m.skipped, m.queued, m.coalesced, m.writes, m.pending} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
