package hub

import (
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// Defaults chosen from the propagation benchmark (hub/BENCHMARKS.md).
const (
	DefaultQPS     = 500
	DefaultBurst   = 1000
	DefaultWorkers = 16
	// DefaultMaxReplicatedBytes caps one root's replicas in etcd (serialized replica × selected
	// clusters): a 64 KiB policy on 2,000 clusters, a 6 KiB one on 20,000. etcd's default quota is
	// 2 GiB for everything the hub stores, and one root must not be able to take most of it.
	DefaultMaxReplicatedBytes = 128 << 20
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
	// Workers is how many writes one root's reconcile issues at once, and how many roots
	// reconcile at once unless ConcurrentRoots says otherwise; DefaultWorkers when zero.
	Workers int
	// ConcurrentRoots, when positive, is how many root policies reconcile at once; Workers when
	// zero. Measured on 2 cores at 60,000 replicas, 4 instead of 16 saved neither memory nor time
	// (docs/benchmarks.md, Session 9): an operator's knob, not a default to change.
	ConcurrentRoots int
	// MaxReplicatedBytes caps the bytes one root policy's replicas take in etcd (the serialized
	// replica times the clusters it selects); a root over it is not propagated and says so in its
	// Propagated condition. DefaultMaxReplicatedBytes when zero; negative means no cap.
	MaxReplicatedBytes int64
	// RootStatusInterval is how long a rollout in progress may hold back from its root policy's
	// status what its replicas also carry: clusters' answers (their compliance, a success) and
	// turns, so that a root's turns and answers make about one status write an interval rather
	// than one or more each. A success while a soak time counts, a turn while a progress deadline
	// counts, a failure and the rollout's end are written at once. It is the least interval: it
	// grows by 10 ms per cluster of every root whose rollout progresses (30 s for one root of
	// 3,000, a minute for two or more), up to a minute, and past that by 2 ms per cluster, up to
	// five minutes (two at 60,000 such clusters), since status writes cost the apiserver in
	// proportion. A cluster's answer that only changes its line then waits as long before its
	// root is reconciled. propagator.DefaultStatusInterval when zero; negative writes every change
	// at once.
	RootStatusInterval time.Duration
	// Clock is the rollout clock (soak time, deadlines); the real clock when nil.
	Clock clock.Clock
	// MemoryLimit, when positive, is the Go runtime's soft memory limit for the hub process (as
	// GOMEMLIMIT): the hub's caches are small next to what its propagation bursts allocate and
	// free, so a limit trades some GC CPU for a lower peak. Zero (and GOMEMLIMIT unset) means an
	// adaptive limit: DefaultMemoryLimit, or the live heap plus the runtime's own overhead
	// (stacks, GC metadata) plus an eighth of the live heap (at least 16 MiB) when that is more,
	// never above 85 % of the container's (cgroup) memory limit; negative means no limit. Applied
	// by Run only.
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
	if o.ConcurrentRoots <= 0 {
		o.ConcurrentRoots = o.Workers
	}
	if o.MaxReplicatedBytes == 0 {
		o.MaxReplicatedBytes = DefaultMaxReplicatedBytes
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.MetricsBindAddress == "" {
		o.MetricsBindAddress = ":8080"
	}
	return o
}

// DefaultMemoryLimit is the floor of the soft memory limit a hub gives itself when Options name
// none and GOMEMLIMIT is unset. Measured (hub/BENCHMARKS.md): 1,000 clusters × 10 roots keep
// ~30 MB live at the end of a propagation; under GOGC alone the heap doubles that before a
// collection, with the limit the hub peaks at ~82 MiB RSS instead of 126–160, in the same time.
const DefaultMemoryLimit = 48 << 20
