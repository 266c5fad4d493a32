package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/reports"
)

var clusterPolicy = func(name string) reports.PolicyRef {
	return reports.PolicyRef{Scope: reportsv1alpha1.PolicyScopeCluster, Name: name}
}

func newClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(cluster.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testCtx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// testQueue is a running queue on a fake clock: nothing is written before the test steps it.
type testQueue struct {
	*Queue
	clock *clocktesting.FakeClock
}

func startQueue(t *testing.T, c client.Client, opts Options) *testQueue {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Now())
	opts.Client, opts.Clock = c, clk
	q, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { q.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &testQueue{Queue: q, clock: clk}
}

// settle waits until the queue has read n answers in all (queued, skipped or dropped).
func (q *testQueue) settle(t *testing.T, n float64) {
	t.Helper()
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		got := count(q.metrics.queued) + count(q.metrics.skipped) + count(q.metrics.dropped)
		return got >= n, fmt.Sprintf("%v of %v answers read", got, n)
	})
}

// flush steps the clock until the queue has finished n writes: a writer may set its timer just
// after a step, so one step is not always enough.
func (q *testQueue) flush(t *testing.T, n float64) {
	t.Helper()
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		q.clock.Step(q.opts.Delay)
		got := count(q.metrics.writes)
		return got >= n, fmt.Sprintf("%v of %v writes done", got, n)
	})
}

func count(c prometheus.Collector) float64 {
	var sum float64
	ch := make(chan prometheus.Metric, 16)
	go func() { c.Collect(ch); close(ch) }()
	for m := range ch {
		var out dto.Metric
		if err := m.Write(&out); err == nil {
			sum += out.GetCounter().GetValue() + out.GetGauge().GetValue()
		}
	}
	return sum
}

func createNamespace(t *testing.T, c client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := c.Create(testCtx(t), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func createConfigMap(t *testing.T, c client.Client, ns, name string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := c.Create(testCtx(t), cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

// admissionRequest is the AdmissionRequest kube-apiserver sends a validating webhook for op on
// cm (its object as stored, metadata.uid included).
func admissionRequest(t *testing.T, uid types.UID, op string, cm *corev1.ConfigMap) []byte {
	t.Helper()
	obj := cm.DeepCopy()
	obj.APIVersion, obj.Kind = "v1", "ConfigMap"
	b, err := json.Marshal(map[string]any{
		"uid":       uid,
		"kind":      map[string]string{"group": "", "version": "v1", "kind": "ConfigMap"},
		"resource":  map[string]string{"group": "", "version": "v1", "resource": "configmaps"},
		"operation": op, "namespace": cm.Namespace, "name": cm.Name,
		"userInfo": map[string]any{"username": "alice"},
		"object":   obj,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func getReport(t *testing.T, c client.Client, cm *corev1.ConfigMap) *reportsv1alpha1.ResourceReport {
	t.Helper()
	var r reportsv1alpha1.ResourceReport
	if err := c.Get(testCtx(t), client.ObjectKey{Namespace: cm.Namespace, Name: string(cm.UID)}, &r); err != nil {
		t.Fatalf("report of %s/%s: %v", cm.Namespace, cm.Name, err)
	}
	return &r
}
