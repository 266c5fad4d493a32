package rollup

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// writes counts the roll-up's requests that change a summary on the hub, by verb: flat at rest,
// since a summary is written only when it changed and the hub is shared by the whole fleet.
var writes = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "regent_reports_rollup_writes_total",
	Help: "Writes of rolled-up policy reports to the hub, by verb.",
}, []string{"verb"})

func init() { metrics.Registry.MustRegister(writes) }
