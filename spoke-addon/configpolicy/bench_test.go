package configpolicy

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	policyv1 "regent.dev/regent/api/policy/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
)

const benchPolicies = 500

// benchPolicy looks at the shared ConfigMap and one of its own, so a change to the shared one
// re-evaluates every policy.
func benchPolicy(i int) string {
	return policyYAML("bench", fmt.Sprintf("p-%03d", i), "inform", fmt.Sprintf(`
object-templates:
- complianceType: musthave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: shared, namespace: bench}, data: {mode: "on"}}
- complianceType: mustonlyhave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: own-%03d, namespace: bench}, data: {index: "%d"}}`, i, i))
}

// createBenchPolicies creates the shared ConfigMap, one ConfigMap per policy and the policies,
// from 8 goroutines so setup does not dominate the run.
func createBenchPolicies(b *testing.B, c client.Client) {
	namespace(b, c, "bench", nil)
	apply(b, c, configMap("bench", "shared", `{mode: "on"}`))
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				apply(b, c, configMap("bench", fmt.Sprintf("own-%03d", i), fmt.Sprintf(`{index: "%d"}`, i)))
				apply(b, c, benchPolicy(i))
			}
		})
	}
	for i := range benchPolicies {
		work <- i
	}
	close(work)
	wg.Wait()
}

// BenchmarkEvaluate_500Policies measures the evaluation itself: 500 policies of two templates
// each, read through the informer cache as the controller reads them, no status writes.
func BenchmarkEvaluate_500Policies(b *testing.B) {
	hub := fleettest.Hub(b)
	c := benchClient(b, hub.Config)
	createBenchPolicies(b, c)
	mgr, err := ctrl.NewManager(hub.Config, ctrl.Options{Scheme: scheme.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{UsePriorityQueue: new(bool)}}) // no priority queue: controller-runtime#3538
	if err != nil {
		b.Fatal(err)
	}
	// The controller's read path: the scoped object caches, without a controller to wake.
	caches := newObjectCaches(hub.Config, cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()}, 0)
	caches.watch = func(cache.Cache, schema.GroupVersionKind) error { return nil }
	if err := mgr.Add(caches); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		b.Fatal("cache did not sync")
	}
	e := &evaluator{reader: caches, namespaceReader: mgr.GetCache(), writer: mgr.GetClient(), mapper: mgr.GetRESTMapper(), watch: caches.ensure}
	list := &policyv1.ConfigurationPolicyList{}
	if err := c.List(ctx, list, client.InNamespace("bench")); err != nil || len(list.Items) != benchPolicies {
		b.Fatalf("list policies: %d, %v", len(list.Items), err)
	}
	for i := range list.Items { // warm the informers
		if _, err := e.evaluate(ctx, &list.Items[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		for i := range list.Items {
			out, err := e.evaluate(ctx, &list.Items[i])
			if err != nil || !out.templates[0].compliant || !out.templates[1].compliant {
				b.Fatalf("evaluate: %+v, %v", out, err)
			}
		}
	}
	b.ReportMetric(float64(b.N*benchPolicies)/time.Since(start).Seconds(), "evaluations/s")
}

// BenchmarkReconcile_500Policies_OneObjectChange measures the controller end to end: one write to
// the ConfigMap all 500 policies look at flips every policy's compliance; an op ends when all 500
// have been re-evaluated through the watch and their statuses written to the apiserver.
func BenchmarkReconcile_500Policies_OneObjectChange(b *testing.B) { benchReconcile(b) }

// BenchmarkReconcile_500Policies_OneObjectChange_WithReportFeed is the same with the report feed
// running beside the controller: every status write also becomes ResourceReport writes (all 500
// policies' results land in the shared ConfigMap's one report). Evaluation must not wait for them.
func BenchmarkReconcile_500Policies_OneObjectChange_WithReportFeed(b *testing.B) {
	benchReconcile(b, SetupReportFeed)
}

func benchReconcile(b *testing.B, also ...func(ctrl.Manager) error) {
	hub := fleettest.Hub(b)
	c, log := startController(b, hub.Config, Options{}, also...)
	createBenchPolicies(b, c)
	written := func() int {
		log.mu.Lock()
		defer log.mu.Unlock()
		n := 0
		for _, w := range log.writes {
			n += w
		}
		return n
	}
	// Settled: every policy Compliant at its generation.
	eventually(b, "500 policies evaluated", func() bool {
		list := &policyv1.ConfigurationPolicyList{}
		if err := c.List(context.Background(), list, client.InNamespace("bench")); err != nil {
			b.Fatal(err)
		}
		for _, p := range list.Items {
			if p.Status.ComplianceState != policyv1.Compliant {
				return false
			}
		}
		return len(list.Items) == benchPolicies
	})
	if len(also) > 0 {
		// The first reports are written (every ConfigMap's, the shared one holding every policy),
		// so only the changes the loop causes are measured.
		shared, _ := getObject(b, c, "v1", "ConfigMap", "bench", "shared")
		eventually(b, "every ConfigMap has its report, the shared one with every policy", func() bool {
			list := &reportsv1alpha1.ResourceReportList{}
			if err := c.List(context.Background(), list, client.InNamespace("bench")); err != nil || len(list.Items) != benchPolicies+1 {
				return false
			}
			for _, r := range list.Items {
				if r.Name == string(shared.GetUID()) {
					return len(r.Spec.Results) == benchPolicies
				}
			}
			return false
		})
	}
	mode := []string{"off", "on"}
	appliesBefore := map[string]float64{}
	for _, outcome := range []string{"written", "unchanged", "error"} {
		appliesBefore[outcome] = appliesSoFar(outcome)
	}
	b.ResetTimer()
	start := time.Now()
	n := 0
	for b.Loop() {
		before := written()
		apply(b, c, configMap("bench", "shared", fmt.Sprintf("{mode: %q}", mode[n%2])))
		n++
		for written() < before+benchPolicies {
			time.Sleep(2 * time.Millisecond)
		}
	}
	b.ReportMetric(float64(n*benchPolicies)/time.Since(start).Seconds(), "evaluations/s")
	if len(also) > 0 {
		for _, outcome := range []string{"written", "unchanged", "error"} {
			b.ReportMetric(appliesSoFar(outcome)-appliesBefore[outcome], "report-"+outcome+"-total")
		}
	}
}

func benchClient(b *testing.B, cfg *rest.Config) client.Client {
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func appliesSoFar(outcome string) float64 {
	var m dto.Metric
	if err := reportApplies.WithLabelValues(outcome).Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
