package hub

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/propagator"
)

// policy_governance_info is OCM's, with its labels (type, policy, policy_namespace,
// cluster_namespace) and values, so alerts and dashboards written for OCM's propagator keep working.
const (
	governanceInfoName = "policy_governance_info"
	governanceInfoHelp = "The compliance status of the named policy. 0 == Compliant. 1 == NonCompliant. -1 == Unknown/Pending"
)

// governanceInfo describes the family to the registry (governanceReservation).
var governanceInfo = prometheus.NewDesc("policy_governance_info", governanceInfoHelp,
	[]string{"type", "policy", "policy_namespace", "cluster_namespace"}, nil)

// governanceReservation holds policy_governance_info's name and labels in the registry, which
// refuses any other collector of that name, while governanceMetrics serves its series: the
// registry's Describe is its list of what the hub exports. It collects nothing itself.
type governanceReservation struct{}

func (governanceReservation) Describe(ch chan<- *prometheus.Desc) { ch <- governanceInfo }
func (governanceReservation) Collect(chan<- prometheus.Metric)    {}

// reserveGovernanceInfo registers governanceReservation in reg once; a second hub in the same
// process (tests) finds it there.
func reserveGovernanceInfo(reg prometheus.Registerer) error {
	err := reg.Register(governanceReservation{})
	if errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		return nil
	}
	return err
}

// governanceMetrics serves the hub's /metrics: the controller-runtime registry's families and
// policy_governance_info, read from the hub's informer cache at scrape time, so nothing goes stale
// when a policy is deleted or disabled and the hub does no work between scrapes.
//
// The family is built here rather than by a registered Collector because a large fleet has
// 150,000 series: the registry's Collect path allocates a Metric, a dto.Metric and a dto.Gauge
// per series and checks and hashes each, ~50 MB for one scrape at that size, the largest
// transient in the hub's heap. Here the series are one slice, share their label pairs (one per
// distinct value) and their three gauges: ~20 MB.
type governanceMetrics struct {
	registry prometheus.Gatherer
	cache    cache.Cache
	// replicas is the hub's replica cache; nil when cache holds the replicas too.
	replicas cache.Cache
	log      logr.Logger
}

// filterProvider has the metrics server answer /metrics from g instead of from the registry
// alone: a filter is the only hook controller-runtime gives on that path. Other paths pass through.
func (g *governanceMetrics) filterProvider(*rest.Config, *http.Client) (metricsserver.Filter, error) {
	return func(_ logr.Logger, next http.Handler) (http.Handler, error) {
		ours := promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == metricsPath {
				if !g.serveText(w, r) {
					ours.ServeHTTP(w, r)
				}
				return
			}
			next.ServeHTTP(w, r)
		}), nil
	}, nil
}

// metricsPath is where controller-runtime's metrics server serves its registry.
const metricsPath = "/metrics"

// Gather returns the registry's families with policy_governance_info among them, by name: what
// a scrape in protobuf gets (text is streamed, governance_metrics_text.go). A cache that cannot
// be read leaves the family out and says why in the log; the other families are still served.
func (g *governanceMetrics) Gather() ([]*dto.MetricFamily, error) {
	families, err := g.registry.Gather()
	policies, ok := g.policies()
	if !ok {
		return families, err
	}
	family := governanceFamily(policies)
	at, _ := slices.BinarySearchFunc(families, family.GetName(), func(f *dto.MetricFamily, name string) int {
		return strings.Compare(f.GetName(), name)
	})
	return slices.Insert(families, at, family), err
}

// policies are the cached Policies and replicas, to be read only, and whether the family may be
// served from them.
func (g *governanceMetrics) policies() ([]client.Object, bool) {
	if g.cache == nil {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	policies, synced, err := cachedPolicies(ctx, g.cache, nil)
	if err == nil && synced && g.replicas != nil {
		policies, synced, err = cachedPolicies(ctx, g.replicas, policies)
	}
	if err != nil {
		g.log.Error(err, "policy_governance_info: list policies from the cache")
		return nil, false
	}
	// A cache still on its first list would report a part of the fleet as if it were all of it;
	// Prometheus reads the family's absence as "no data" instead. The scrape does not wait for
	// the list either: it would hold a second view of the policies beside it.
	return policies, synced
}

// governanceFamily is policy_governance_info for policies, its series sorted by label values as
// the registry sorts its own. The series are sorted in place, through their shared label pairs,
// rather than from keys of their own: a copy of 150,000 keys would be a third of the scrape.
func governanceFamily(policies []client.Object) *dto.MetricFamily {
	pairs := labelPairs{}
	gauges := map[float64]*dto.Gauge{}
	metrics := make([]dto.Metric, 0, len(policies))
	labels := make([]*dto.LabelPair, 0, 4*len(policies))
	for _, p := range policies {
		typ, policy, policyNS, clusterNS, ok := governanceLabels(p)
		if !ok {
			continue
		}
		// Sorted by label name, as the encoders expect them.
		labels = append(labels, pairs.get("cluster_namespace", clusterNS), pairs.get("policy", policy),
			pairs.get("policy_namespace", policyNS), pairs.get("type", typ))
		value := complianceValue(complianceOf(p))
		gauge, ok := gauges[value]
		if !ok {
			gauge = &dto.Gauge{Value: ptr.To(value)}
			gauges[value] = gauge
		}
		metrics = append(metrics, dto.Metric{Label: labels[len(labels)-4 : len(labels) : len(labels)], Gauge: gauge})
	}
	family := &dto.MetricFamily{Name: ptr.To(governanceInfoName), Help: ptr.To(governanceInfoHelp),
		Type: dto.MetricType_GAUGE.Enum(), Metric: make([]*dto.Metric, len(metrics))}
	for i := range metrics {
		family.Metric[i] = &metrics[i]
	}
	slices.SortFunc(family.Metric, func(a, b *dto.Metric) int {
		for i := range a.Label {
			// One pair per value: the same pair is the same value.
			if a.Label[i] == b.Label[i] {
				continue
			}
			return strings.Compare(*a.Label[i].Value, *b.Label[i].Value)
		}
		return 0
	})
	return family
}

// cachedPolicies appends the Policies (or CachedReplicas) c holds to out, the cached objects
// themselves, to be read only (a List, even without deep copies, copies every Policy into a fresh
// slice), and says whether the cache has synced: none are appended before.
func cachedPolicies(ctx context.Context, c cache.Cache, out []client.Object) (policies []client.Object, synced bool, err error) {
	inf, err := c.GetInformer(ctx, &policyv1.Policy{}, cache.BlockUntilSynced(false))
	if err != nil || !inf.HasSynced() {
		return out, false, err
	}
	if withIndexer, ok := inf.(interface{ GetIndexer() toolscache.Indexer }); ok {
		objs := withIndexer.GetIndexer().List()
		out = slices.Grow(out, len(objs))
		for _, o := range objs {
			if p, ok := o.(client.Object); ok {
				out = append(out, p)
			}
		}
		return out, true, nil
	}
	list := &policyv1.PolicyList{}
	if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return out, false, err
	}
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, true, nil
}

// labelPairs hands out one pair per label name and value, for one scrape: the encoders only read
// them.
type labelPairs map[[2]string]*dto.LabelPair

func (l labelPairs) get(name, value string) *dto.LabelPair {
	if p, ok := l[[2]string{name, value}]; ok {
		return p
	}
	p := &dto.LabelPair{Name: ptr.To(name), Value: ptr.To(value)}
	l[[2]string{name, value}] = p
	return p
}

// governanceLabels follows OCM: a replica (`<root namespace>.<root name>` in a cluster namespace)
// is "propagated", anything else "root" with the sentinel cluster namespace "<null>"; disabled
// policies and replicas whose name does not split are left out.
func governanceLabels(p client.Object) (typ, policy, policyNS, clusterNS string, ok bool) {
	if full, isPolicy := p.(*policyv1.Policy); isPolicy && full.Spec.Disabled {
		return "", "", "", "", false
	}
	if _, replica := p.GetLabels()[propagator.RootPolicyLabel]; replica {
		ns, name, found := strings.Cut(p.GetName(), ".")
		if !found {
			return "", "", "", "", false
		}
		return "propagated", name, ns, p.GetNamespace(), true
	}
	return "root", p.GetName(), p.GetNamespace(), "<null>", true
}

// complianceOf is a Policy's or a CachedReplica's status.compliant.
func complianceOf(p client.Object) policyv1.ComplianceState {
	switch p := p.(type) {
	case *policyv1.Policy:
		return p.Status.ComplianceState
	case *propagator.CachedReplica:
		return p.Compliance()
	}
	return ""
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
