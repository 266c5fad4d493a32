package specsync

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var writes = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "regent_specsync_writes_total",
	Help: "Writes of policy copies on the managed cluster, by operation.",
}, []string{"operation"})

func init() { metrics.Registry.MustRegister(writes) }
