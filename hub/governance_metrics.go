package hub

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
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
	cache cache.Cache
	log   logr.Logger
}

func (g governanceCollector) Describe(ch chan<- *prometheus.Desc) { ch <- governanceInfo }

// Collect sends one series per policy, 150,000 on a large fleet, all held by the registry until
// the scrape is written: it reads the informer's own objects (a List, even without deep copies,
// copies every Policy into a fresh slice), and the series share their label pairs (one per
// distinct value: a few thousand clusters and policies) instead of four of their own each.
func (g governanceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	policies, err := g.policies(ctx)
	if err != nil {
		g.log.Error(err, "policy_governance_info: list policies from the cache")
		return
	}
	pairs := labelPairs{}
	series := make([]governanceSeries, 0, len(policies))
	labels := make([]*dto.LabelPair, 0, 4*len(policies))
	for _, p := range policies {
		typ, policy, policyNS, clusterNS, ok := governanceLabels(p)
		if !ok {
			continue
		}
		// Sorted by label name, as the registry wants them.
		labels = append(labels, pairs.get("cluster_namespace", clusterNS), pairs.get("policy", policy),
			pairs.get("policy_namespace", policyNS), pairs.get("type", typ))
		series = append(series, governanceSeries{labels: labels[len(labels)-4 : len(labels) : len(labels)],
			value: complianceValue(p.Status.ComplianceState)})
		ch <- &series[len(series)-1]
	}
}

// policies returns the cached Policies themselves, to be read only.
func (g governanceCollector) policies(ctx context.Context) ([]*policyv1.Policy, error) {
	inf, err := g.cache.GetInformer(ctx, &policyv1.Policy{})
	if err != nil {
		return nil, err
	}
	if withIndexer, ok := inf.(interface{ GetIndexer() toolscache.Indexer }); ok {
		objs := withIndexer.GetIndexer().List()
		out := make([]*policyv1.Policy, 0, len(objs))
		for _, o := range objs {
			if p, ok := o.(*policyv1.Policy); ok {
				out = append(out, p)
			}
		}
		return out, nil
	}
	list := &policyv1.PolicyList{}
	if err := g.cache.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]*policyv1.Policy, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// governanceSeries is one series of policy_governance_info. Its label pairs are shared with other
// series: the registry and the encoders only read them.
type governanceSeries struct {
	labels []*dto.LabelPair
	value  float64
}

func (s *governanceSeries) Desc() *prometheus.Desc { return governanceInfo }

func (s *governanceSeries) Write(m *dto.Metric) error {
	m.Label = s.labels
	m.Gauge = &dto.Gauge{Value: &s.value}
	return nil
}

// labelPairs hands out one pair per label name and value, for one scrape.
type labelPairs map[[2]string]*dto.LabelPair

func (l labelPairs) get(name, value string) *dto.LabelPair {
	k := [2]string{name, value}
	if p, ok := l[k]; ok {
		return p
	}
	p := &dto.LabelPair{Name: &k[0], Value: &k[1]}
	l[k] = p
	return p
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
