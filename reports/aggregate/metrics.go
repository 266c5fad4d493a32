package aggregate

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// writes counts the aggregator's requests that change a Report, by verb (create, update, delete):
// at rest it stays flat, which is the point of writing only what changed.
var writes = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "regent_reports_aggregator_writes_total",
	Help: "Report and ClusterReport writes by the reports aggregator, by verb.",
}, []string{"verb"})

func init() { metrics.Registry.MustRegister(writes) }
