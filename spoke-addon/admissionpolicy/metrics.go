package admissionpolicy

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	revisionsCreated = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "regent_admissionpolicy_revisions_created_total",
		Help: "PolicyRevisions created, one per policy generation.",
	})
	revisionsDeleted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "regent_admissionpolicy_revisions_collected_total",
		Help: "PolicyRevisions deleted because they were beyond the PolicyServer's kept count.",
	})
	webhookSwitches = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "regent_admissionpolicy_webhook_switches_total",
		Help: "Webhook configurations moved to a generation every live replica is Ready for.",
	})
	rollbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "regent_admissionpolicy_rollbacks_total",
		Help: "Rollback annotations acted on, by result: restored, unknown_generation or managed_by_hub (a hub-delivered policy follows the hub).",
	}, []string{"result"})
	statusWrites = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "regent_admissionpolicy_status_writes_total",
		Help: "Policy status updates; a reconcile that changes nothing writes nothing.",
	})
)

func init() {
	metrics.Registry.MustRegister(revisionsCreated, revisionsDeleted, webhookSwitches, rollbacks, statusWrites)
}
