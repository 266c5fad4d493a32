package configpolicy

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	evaluations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "regent_configpolicy_evaluations_total",
		Help: "ConfigurationPolicy evaluations by result: Compliant, NonCompliant or error.",
	}, []string{"result"})
	evaluationSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "regent_configpolicy_evaluation_seconds",
		Help:    "Time to evaluate one ConfigurationPolicy, writes included.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 8),
	})
	statusWrites = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "regent_configpolicy_status_writes_total",
		Help: "ConfigurationPolicy status updates; evaluations that change nothing write nothing.",
	})
	reportApplies = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "regent_configpolicy_report_applies_total",
		Help: "Per-resource report updates by the ConfigurationPolicy report feed, by outcome: written, unchanged or error.",
	}, []string{"outcome"})
	objectWatches = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "regent_configpolicy_object_watches",
		Help: "Watches held on the objects ConfigurationPolicies name, by scope: namespace (one kind in one namespace) or cluster (one kind everywhere).",
	}, []string{"scope"})
)

func init() {
	metrics.Registry.MustRegister(evaluations, evaluationSeconds, statusWrites, reportApplies, objectWatches)
}
