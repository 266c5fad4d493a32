package hub

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/propagator"
)

// BenchmarkGovernanceScrape serves policy_governance_info for 3,000 clusters × 50 roots (the
// scale of docs/scale.md): built as the hub's Gather does for protobuf (family), streamed as the
// hub writes the text format (text), and through a registry as a client_golang Collector of const
// metrics would (registry-collector). B/op is what one scrape adds to the hub's heap.
func BenchmarkGovernanceScrape(b *testing.B) {
	const clusters, roots = 3000, 50
	policies := make([]client.Object, 0, clusters*roots)
	states := []policyv1.ComplianceState{policyv1.Compliant, policyv1.NonCompliant, ""}
	for r := range roots {
		root := fmt.Sprintf("root-%d", r)
		for c := range clusters {
			// As the hub's replica cache holds them.
			policies = append(policies, propagator.NewCachedReplica(&policyv1.Policy{
				ObjectMeta: metav1.ObjectMeta{Name: "policies." + root, Namespace: fmt.Sprintf("cluster-%d", c),
					Labels: map[string]string{propagator.RootPolicyLabel: "policies." + root}},
				Status: policyv1.PolicyStatus{ComplianceState: states[(r+c)%len(states)]}}))
		}
	}
	b.Run("family", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if f := governanceFamily(policies); len(f.Metric) != len(policies) {
				b.Fatalf("%d series, want %d", len(f.Metric), len(policies))
			}
		}
	})
	b.Run("text", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			// The clone is the slice a scrape lists from the cache (cachedPolicies) and sorts.
			w := bufio.NewWriterSize(io.Discard, 64<<10)
			writeGovernanceText(w, slices.Clone(policies))
			if err := w.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("registry-collector", func(b *testing.B) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(constCollector(policies))
		b.ReportAllocs()
		for b.Loop() {
			if fs, err := reg.Gather(); err != nil || len(fs[0].Metric) != len(policies) {
				b.Fatalf("gather: %v", err)
			}
		}
	})
}

type constCollector []client.Object

var governanceDesc = prometheus.NewDesc(governanceInfoName, governanceInfoHelp,
	[]string{"type", "policy", "policy_namespace", "cluster_namespace"}, nil)

func (c constCollector) Describe(ch chan<- *prometheus.Desc) { ch <- governanceDesc }

func (c constCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c {
		typ, policy, policyNS, clusterNS, _ := governanceLabels(p)
		ch <- prometheus.MustNewConstMetric(governanceDesc, prometheus.GaugeValue,
			complianceValue(complianceOf(p)), typ, policy, policyNS, clusterNS)
	}
}
