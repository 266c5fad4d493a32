package opa

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"

	"github.com/open-policy-agent/opa/v1/storage"
)

// admissionBenchEngine is an engine with the EU/PCI policy and n ManagedClusters (a third in the
// US, PCI levels 1..3), as the inventory would replicate them.
func admissionBenchEngine(b testing.TB, n int) *Engine {
	b.Helper()
	e := NewEngine()
	if err := e.SetSource("regent-system/eu-pci", map[string]string{"regent-system/eu-pci/p.rego": euPCIPolicy}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < n; i++ {
		region := []string{"eu", "eu", "us"}[i%3]
		name := fmt.Sprintf("cluster-%05d", i)
		obj := map[string]any{"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
			"metadata": map[string]any{"name": name, "labels": map[string]any{"region": region, "pci-level": fmt.Sprint(1 + i%3)}}}
		if err := writePath(ctx, e.Store(), storage.Path{InventoryRoot, "managedclusters", name}, obj); err != nil {
			b.Fatal(err)
		}
	}
	return e
}

func benchEvaluator(e *Engine) *evaluator {
	pci := map[string]string{"compliance": "pci"}
	return &evaluator{engine: e, pkg: PackagePath(DefaultAdmissionPackage),
		namespaceLabels: func(context.Context, string) (map[string]string, error) { return pci, nil }}
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

// BenchmarkPlacementAdmission is one AdmissionReview through the webhook's HTTP handler (decode,
// namespace labels, query, merge, JSON patch, encode) with 1,000 clusters replicated: the work the
// hub does per Placement create, TLS and the apiserver's side excluded.
func BenchmarkPlacementAdmission(b *testing.B) {
	a := &Admission{evaluator: benchEvaluator(admissionBenchEngine(b, 1000)), policiesExist: func() bool { return true },
		recorder: record.NewFakeRecorder(1 << 16), budget: DefaultAdmissionBudget}
	h := a.Handler()
	raw, err := json.Marshal(newPlacement("payments", "pl", regionPredicate("eu")))
	if err != nil {
		b.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Create, Namespace: "payments", Name: "pl",
			Kind:   metav1.GroupVersionKind{Group: clusterv1beta1.GroupName, Version: "v1beta1", Kind: "Placement"},
			Object: runtime.RawExtension{Raw: raw}},
	})
	if err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		w := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, AdmissionPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(w, req)
		lat = append(lat, time.Since(start))
		if w.Code != http.StatusOK || !bytes.Contains(w.Body.Bytes(), []byte(`"patch"`)) {
			b.Fatalf("response %d %s", w.Code, w.Body)
		}
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

// BenchmarkRemediationPass is one re-evaluation of every Placement after an inventory change (what
// the remediator does per batch), with 1,000 clusters: evaluation and merge, patches excluded.
func BenchmarkRemediationPass(b *testing.B) {
	e := admissionBenchEngine(b, 1000)
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("placements=%d", n), func(b *testing.B) {
			r := NewRemediator(benchEvaluator(e), nil, record.NewFakeRecorder(1<<16), true)
			objs := make([]map[string]any, n)
			for i := range objs {
				raw, err := json.Marshal(newPlacement("payments", fmt.Sprintf("pl-%d", i), regionPredicate("eu")))
				if err != nil {
					b.Fatal(err)
				}
				if err := json.Unmarshal(raw, &objs[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, c := range r.plan(context.Background(), objs) {
					if c.err != nil || !c.changed {
						b.Fatalf("plan: changed=%v err=%v", c.changed, c.err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/placement")
		})
	}
}
