package propagator

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	policyv1 "regent.dev/regent/api/policy/v1"
)

var (
	replicasGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "regent_propagator_replicas",
		Help: "Replicated policies per root policy.",
	}, []string{"namespace", "policy"})
	rolloutClusters = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "regent_rollout_clusters",
		Help: "Clusters of a root policy's rollout by rollout status.",
	}, []string{"namespace", "policy", "status"})
	reconcileSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "regent_propagator_reconcile_duration_seconds",
		Help:    "Time one root policy reconcile takes, writes included.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
	})
	writes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "regent_propagator_apiserver_writes_total",
		Help: "Writes the propagator sent to the apiserver, by verb and resource.",
	}, []string{"verb", "resource"})
	statusHeld = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "regent_propagator_root_status_held_total",
		Help: "Root policy status changes held back because they were only clusters' answers and turns of a rollout in progress, which the replicas carry; they are written within --root-status-interval, or with the next change that cannot wait.",
	})
	answers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "regent_propagator_replica_answers_total",
		Help: "Clusters' answers (replica status updates) by what they set off: a reconcile of the root now (a turn completed), after the event batch (a failure, the root's compliance), held for the root's status interval (a status line only), or ignored (the same result again).",
	}, []string{"route"})
	ownEchoes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "regent_propagator_echoes_total",
		Help: "Watch events of the hub's own writes that reconciled nothing, by what was written (replica: its spec; root: its status): the reconcile that wrote them had planned with them.",
	}, []string{"object"})
	decidedAgain = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "regent_propagator_decided_again_total",
		Help: "Root status patches whose decision its own record changes (rollout.Planner.Settles): the root was decided again at once, since the patch's echo reconciles nothing.",
	})
	cacheRelists = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "regent_propagator_policy_cache_relists_total",
		Help: "Times the hub's Policy cache began taking objects out of version order (its first list, a relist after its watch ended, a resync); replica writes it passed wait until it settles.",
	})
)

func init() {
	metrics.Registry.MustRegister(replicasGauge, rolloutClusters, reconcileSeconds, writes, statusHeld, answers, ownEchoes, decidedAgain, cacheRelists)
}

var rolloutStatuses = []policyv1.RolloutStatus{policyv1.RolloutToApply, policyv1.RolloutProgressing,
	policyv1.RolloutSucceeded, policyv1.RolloutFailed, policyv1.RolloutTimeOut}

// observe publishes the gauges of one root after its reconcile.
func observe(root *policyv1.Policy, p plan) {
	replicasGauge.WithLabelValues(root.Namespace, root.Name).Set(float64(len(p.desired)))
	counts := map[policyv1.RolloutStatus]int{}
	for _, c := range p.decision.Clusters {
		counts[c.Status]++
	}
	for _, s := range rolloutStatuses {
		rolloutClusters.WithLabelValues(root.Namespace, root.Name, string(s)).Set(float64(counts[s]))
	}
}

// forget drops the gauges of a deleted root.
func forget(namespace, name string) {
	replicasGauge.DeleteLabelValues(namespace, name)
	for _, s := range rolloutStatuses {
		rolloutClusters.DeleteLabelValues(namespace, name, string(s))
	}
}
