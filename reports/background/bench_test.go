package background

import (
	"flag"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
)

var benchObjects = flag.Int("background.n", 1000, "ConfigMaps BenchmarkConvergeAfterPolicyChange scans (10000, 100000 for the issue's figures)")

// countingTransport counts the requests the scan sends, watches included (one per watch opened).
type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// BenchmarkConvergeAfterPolicyChange measures, over -background.n ConfigMaps and one policy, the
// time from a new serving generation of the policy to every report carrying it, and the
// apiserver requests the scan sends per changed report. The first scan of all of them is
// reported too.
//
//	go test -run '^$' -bench ConvergeAfterPolicyChange -benchtime 3x ./reports/background -args -background.n 10000
func BenchmarkConvergeAfterPolicyChange(b *testing.B) {
	n := *benchObjects
	e := newEnv(b)
	ns := createNamespace(b, e.c, "bench", map[string]string{"scope": e.ns})
	createConfigMaps(b, e.c, ns, n)

	var requests atomic.Int64
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, n: &requests} })
	start := time.Now()
	e.startAs(b, cfg, 0)
	p := e.cluster("team")
	labels := []string{"team", "owner"}
	e.publish(b, p, 1, configMapPolicy(labels[0], e.ns))
	waitWrites(b, e, n, 0)
	firstScan := time.Since(start)

	b.ResetTimer()
	var converge time.Duration
	var sent, evaluated int64
	for i := range b.N {
		gen := int64(i + 2)
		spec := configMapPolicy(labels[i%2], e.ns)
		e.load(b, p, gen, spec) // compiling is the replicas' work, before the webhook moves
		before, reqBefore, evalBefore := e.writes("apply"), requests.Load(), e.evaluations()
		t0 := time.Now()
		e.serve(b, p, gen, spec)
		waitWrites(b, e, n, before)
		converge += time.Since(t0)
		sent += requests.Load() - reqBefore
		evaluated += int64(e.evaluations() - evalBefore)
		checkLabels(b, e.c, ns, p.Name, gen, n)
	}
	b.StopTimer()
	b.ReportMetric(firstScan.Seconds(), "s/first-scan")
	b.ReportMetric(converge.Seconds()/float64(b.N), "s/converge")
	b.ReportMetric(float64(sent)/float64(b.N*n), "requests/changed-resource")
	b.ReportMetric(float64(evaluated)/float64(b.N*n), "evaluations/changed-resource")
	b.ReportMetric(0, "ns/op")
}

// waitWrites waits until the scan has written n reports since it had written before.
func waitWrites(b *testing.B, e *env, n int, before float64) {
	b.Helper()
	eventually(b, 30*time.Minute, func() (bool, string) {
		w := e.writes("apply") - before
		return w >= float64(n), fmt.Sprintf("%v of %d reports written", w, n)
	})
}

// checkLabels fails unless all n reports of ns carry generation gen of policy.
func checkLabels(b *testing.B, c client.Client, ns, policy string, gen int64, n int) {
	b.Helper()
	key, _ := reportsv1alpha1.PolicyLabelKey(reportsv1alpha1.PolicyScopeCluster, policy)
	list := listOf(resourceReportMeta)
	if err := c.List(ctx(b), list, client.InNamespace(ns), client.MatchingLabels{key: fmt.Sprint(gen)}); err != nil {
		b.Fatal(err)
	}
	if len(list.Items) != n {
		b.Fatalf("%d reports at generation %d, want %d", len(list.Items), gen, n)
	}
}

// createConfigMaps creates n ConfigMaps in ns, every other one labelled team, a few at a time.
func createConfigMaps(b *testing.B, c client.Client, ns string, n int) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%06d", i)}}
				if i%2 == 0 {
					cm.Labels = map[string]string{"team": "x"}
				}
				if err := c.Create(ctx(b), cm); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
