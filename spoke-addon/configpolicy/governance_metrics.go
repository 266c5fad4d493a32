package configpolicy

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// clusterGovernanceInfo is OCM's cluster_policy_governance_info as its config-policy-controller
// exports it on a managed cluster: one series per ConfigurationPolicy, 0 Compliant, 1
// NonCompliant, -1 not yet evaluated.
var clusterGovernanceInfo = prometheus.NewDesc("cluster_policy_governance_info",
	"The compliance status of the named managed cluster policy. 0 == Compliant. 1 == NonCompliant. -1 == Unknown/Pending",
	[]string{"kind", "policy", "policy_namespace", "severity"}, nil)

// governanceCollector reads the addon's cache at scrape time, so a deleted policy has no series
// left and evaluations pay nothing for the metric.
type governanceCollector struct {
	cache client.Reader
	log   logr.Logger
}

func (g governanceCollector) Describe(ch chan<- *prometheus.Desc) { ch <- clusterGovernanceInfo }

func (g governanceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list := &policyv1.ConfigurationPolicyList{}
	if err := g.cache.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		g.log.Error(err, "cluster_policy_governance_info: list ConfigurationPolicies from the cache")
		return
	}
	for i := range list.Items {
		p := &list.Items[i]
		value := -1.0
		switch p.Status.ComplianceState {
		case policyv1.Compliant:
			value = 0
		case policyv1.NonCompliant:
			value = 1
		}
		ch <- prometheus.MustNewConstMetric(clusterGovernanceInfo, prometheus.GaugeValue, value,
			"ConfigurationPolicy", p.Name, p.Namespace, string(p.Spec.Severity))
	}
}

// registerGovernanceMetrics puts the collector in reg; a second addon in the same process
// (tests) replaces the first's.
func registerGovernanceMetrics(reg prometheus.Registerer, c governanceCollector) error {
	err := reg.Register(c)
	var dup prometheus.AlreadyRegisteredError
	if errors.As(err, &dup) {
		reg.Unregister(dup.ExistingCollector)
		err = reg.Register(c)
	}
	return err
}
