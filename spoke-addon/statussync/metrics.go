package statussync

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var writes = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "regent_statussync_hub_writes_total",
	Help: "Status patches of hub replicas.",
})

func init() { metrics.Registry.MustRegister(writes) }
