package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet"
)

// BenchmarkAdmissionPolicyUpdate measures the PolicyRevision lifecycle with three replicas as
// processes: from a policy update until the webhook configuration points at the new generation
// (leader compile and sign, three replicas load and report, controller switches), over 50
// updates; and the p99 of admission requests through the real apiserver during those reloads
// against the same requests at steady state.
//
//	go test ./test/kind-multicluster -run '^$' -bench AdmissionPolicyUpdate -benchtime 1x
func BenchmarkAdmissionPolicyUpdate(b *testing.B) {
	e := deployWithPolicyServers(b, 3, fleet.ClusterSpec{Name: "cluster1"})
	c := e.local["cluster1"]
	ctx := context.Background()
	module := filepath.Join(b.TempDir(), "no-latest.rego")
	if err := os.WriteFile(module, []byte(versionedRego), 0o644); err != nil {
		b.Fatal(err)
	}
	settings := func(v int) *runtime.RawExtension {
		return &runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"version": %d}`, v))}
	}
	policy := &kubewardenv1.ClusterAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-latest"},
		Spec: kubewardenv1.ClusterAdmissionPolicySpec{PolicySpec: kubewardenv1.PolicySpec{
			PolicyServer: "default", Module: "file://" + module, ExecutionMode: "opa", Settings: settings(0),
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
		}},
	}
	if err := c.Create(ctx, policy); err != nil {
		b.Fatal(err)
	}
	servingPath := func() string {
		w := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, types.NamespacedName{Name: "regent-clusterwide-no-latest"}, w); err != nil || len(w.Webhooks) == 0 || w.Webhooks[0].ClientConfig.URL == nil {
			return ""
		}
		return *w.Webhooks[0].ClientConfig.URL
	}
	waitServing := func(gen int64) {
		for !strings.HasSuffix(servingPath(), fmt.Sprintf("/%d", gen)) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitServing(1)
	admit := func() time.Duration {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: "default"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:latest"}}}}
		start := time.Now()
		if err := c.Create(ctx, pod, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "uses :latest") {
			b.Errorf("request not answered by the policy: %v", err)
		}
		return time.Since(start)
	}
	load := func(stop <-chan struct{}) []time.Duration {
		var lat []time.Duration
		for {
			select {
			case <-stop:
				return lat
			default:
				lat = append(lat, admit())
			}
		}
	}
	p99 := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)*99/100] }

	for b.Loop() {
		stop := make(chan struct{})
		go func() { time.Sleep(10 * time.Second); close(stop) }()
		steady := load(stop)

		var during []time.Duration
		stop = make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); during = load(stop) }()
		var switches []time.Duration
		for v := 1; v <= 50; v++ {
			start := time.Now()
			var gen int64
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				p := &kubewardenv1.ClusterAdmissionPolicy{}
				if err := c.Get(ctx, types.NamespacedName{Name: "no-latest"}, p); err != nil {
					return err
				}
				p.Spec.Settings = settings(v)
				err := c.Update(ctx, p)
				gen = p.Generation
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			waitServing(gen)
			switches = append(switches, time.Since(start))
		}
		close(stop)
		wg.Wait()
		slices.Sort(switches)
		b.ReportMetric(float64(switches[len(switches)/2].Milliseconds()), "switch-p50-ms")
		b.ReportMetric(float64(switches[len(switches)*99/100].Milliseconds()), "switch-p99-ms")
		ps, pr := p99(steady), p99(during)
		b.ReportMetric(float64(ps.Microseconds())/1000, "admission-p99-steady-ms")
		b.ReportMetric(float64(pr.Microseconds())/1000, "admission-p99-reloading-ms")
		b.ReportMetric(float64(pr)/float64(ps), "reload/steady-p99")
		b.ReportMetric(float64(len(steady)+len(during)), "admission-requests")
	}
}
