package hub

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/propagator"
)

// governanceInfo is OCM's policy_governance_info, with its labels and values, so alerts and
// dashboards written for OCM's propagator keep working.
var governanceInfo = prometheus.NewDesc("policy_governance_info",
	"The compliance status of the named policy. 0 == Compliant. 1 == NonCompliant. -1 == Unknown/Pending",
	[]string{"type", "policy", "policy_namespace", "cluster_namespace"}, nil)

// governanceCollector reads the hub's informer cache at scrape time instead of keeping a gauge
// per policy up to date: nothing goes stale when a policy is deleted or disabled, and the hub does
// no work between scrapes.
type governanceCollector struct {
	cache client.Reader
	log   logr.Logger
}

func (g governanceCollector) Describe(ch chan<- *prometheus.Desc) { ch <- governanceInfo }

func (g governanceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list := &policyv1.PolicyList{}
	// Read only; copying 150,000 replicas per scrape would cost more than the rest of the hub.
	if err := g.cache.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		g.log.Error(err, "policy_governance_info: list policies from the cache")
		return
	}
	for i := range list.Items {
		if typ, policy, policyNS, clusterNS, ok := governanceLabels(&list.Items[i]); ok {
			ch <- prometheus.MustNewConstMetric(governanceInfo, prometheus.GaugeValue,
				complianceValue(list.Items[i].Status.ComplianceState), typ, policy, policyNS, clusterNS)
		}
	}
}

// governanceLabels follows OCM: a replica (`<root namespace>.<root name>` in a cluster namespace)
// is "propagated", anything else "root" with the sentinel cluster namespace "<null>"; disabled
// policies and replicas whose name does not split are left out.
func governanceLabels(p *policyv1.Policy) (typ, policy, policyNS, clusterNS string, ok bool) {
	if p.Spec.Disabled {
		return "", "", "", "", false
	}
	if _, replica := p.Labels[propagator.RootPolicyLabel]; replica {
		ns, name, found := strings.Cut(p.Name, ".")
		if !found {
			return "", "", "", "", false
		}
		return "propagated", name, ns, p.Namespace, true
	}
	return "root", p.Name, p.Namespace, "<null>", true
}

func complianceValue(c policyv1.ComplianceState) float64 {
	switch c {
	case policyv1.Compliant:
		return 0
	case policyv1.NonCompliant:
		return 1
	default:
		return -1
	}
}

// registerGovernanceMetrics puts the collector in reg; a second hub in the same process (tests)
// replaces the first's.
func registerGovernanceMetrics(reg prometheus.Registerer, c governanceCollector) error {
	err := reg.Register(c)
	var dup prometheus.AlreadyRegisteredError
	if errors.As(err, &dup) {
		reg.Unregister(dup.ExistingCollector)
		err = reg.Register(c)
	}
	return err
}
