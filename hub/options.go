package hub

import (
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// Defaults chosen from the propagation benchmark (hub/BENCHMARKS.md).
const (
	DefaultQPS     = 500
	DefaultBurst   = 1000
	DefaultWorkers = 16
)

// Options configure the hub.
type Options struct {
	// Config reaches the hub apiserver.
	Config *rest.Config
	// MetricsBindAddress serves Prometheus metrics; "0" disables, empty means ":8080".
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz; empty disables.
	HealthProbeBindAddress string
	// QPS and Burst limit the hub's requests to the apiserver; DefaultQPS/DefaultBurst when zero.
	QPS   float32
	Burst int
	// Workers is how many root policies reconcile at once and how many writes one reconcile
	// issues at once; DefaultWorkers when zero.
	Workers int
	// Clock is the rollout clock (soak time, deadlines); the real clock when nil.
	Clock clock.Clock
	// MemoryLimit, when positive, is the Go runtime's soft memory limit for the hub process (as
	// GOMEMLIMIT): the hub's caches are small next to what its propagation bursts allocate and
	// free, so a limit trades some GC CPU for a lower peak. Zero (and GOMEMLIMIT unset) means an
	// adaptive limit: DefaultMemoryLimit, or 1.25× the live heap when that is more; negative means
	// no limit. Applied by Run only.
	MemoryLimit int64
	// LeaderElection makes only one of several hub replicas active, through a Lease in
	// LeaderElectionNamespace.
	LeaderElection          bool
	LeaderElectionNamespace string
}

func (o Options) withDefaults() Options {
	if o.QPS == 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst == 0 {
		o.Burst = DefaultBurst
	}
	if o.Workers == 0 {
		o.Workers = DefaultWorkers
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.MetricsBindAddress == "" {
		o.MetricsBindAddress = ":8080"
	}
	return o
}
