package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/reports"
	"regent.dev/regent/reports/aggregate"
	"regent.dev/regent/test/benchproc"
)

const policies = 5

// BenchmarkReports: REGENT_BENCH_RESOURCES ConfigMaps (default 10,000) in namespaces of
// REGENT_BENCH_PER_NAMESPACE (default 1,000), each evaluated by 5 cluster-wide policies (one in
// ten fails the first policy, with a 52-character message; passes carry none, as Kubewarden's
// accepted answers). Producers write the per-resource reports through reports.Apply
// with 16 workers; the aggregator runs as a child process. Then the first policy changes (a
// new version, a different tenth fails) and is rewritten on every resource. Reported: etcd bytes
// per resource (per-resource report and aggregated Reports), apiserver requests per resource
// (producer and aggregator), the aggregator's time to converge and its peak RSS.
// Run with -benchtime=1x.
func BenchmarkReports(b *testing.B) {
	ctrl.SetLogger(logr.Discard())
	n, perNS := benchproc.EnvInt("REGENT_BENCH_RESOURCES", 10000), benchproc.EnvInt("REGENT_BENCH_PER_NAMESPACE", 1000)
	cluster := fleettest.Hub(b)
	etcd := cluster.EtcdURL() + "/metrics"
	const inUse = "etcd_mvcc_db_total_size_in_use_in_bytes"
	ctx := context.Background()
	var requests atomic.Int64
	cfg := rest.CopyConfig(cluster.Config)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			requests.Add(1)
			return rt.RoundTrip(r)
		})
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		b.Fatal(err)
	}

	for i := 0; i < b.N; i++ {
		run := fmt.Sprintf("r%d", i)
		resources := createConfigMaps(b, ctx, c, run, n, perNS)
		settle()
		before := scrape(etcd, inUse)
		requests.Store(0)
		began := time.Now()
		each(resources, func(k int, res reports.Resource) error {
			_, err := reports.Apply(ctx, c, res, reportsv1alpha1.SourceBackground, results(k, "1"), nil)
			return err
		})
		b.ReportMetric(float64(n)/time.Since(began).Seconds(), "producer-reports/s")
		b.ReportMetric(float64(requests.Load())/float64(n), "producer-requests/resource")
		b.ReportMetric(objectBytes(b, ctx, c, resources[0]), "object-B/resource-report")
		settle()
		reportBytes := scrape(etcd, inUse) - before
		b.ReportMetric(reportBytes/float64(n), "etcd-B/resource-report")

		child := benchproc.Start(b, "TestAggregatorProcess", cluster.Kubeconfig)
		began = time.Now()
		waitConverged(b, ctx, c, n, expectedFails(n, 0))
		b.ReportMetric(time.Since(began).Seconds(), "aggregate-s")
		settle()
		b.ReportMetric((scrape(etcd, inUse)-before-reportBytes)/float64(n), "etcd-B/resource-aggregated")

		// the first policy changes: a new version on every resource, a different tenth failing
		aggBefore := child.Sum("rest_client_requests_total")
		requests.Store(0)
		began = time.Now()
		each(resources, func(k int, res reports.Resource) error {
			_, err := reports.Apply(ctx, c, res, reportsv1alpha1.SourceBackground, results(k+1, "2")[:1], nil)
			return err
		})
		b.ReportMetric(float64(requests.Load())/float64(n), "producer-requests/changed")
		waitConverged(b, ctx, c, n, expectedFails(n, 1))
		b.ReportMetric(time.Since(began).Seconds(), "policy-change-converge-s")
		time.Sleep(3 * time.Second) // the last debounced merges
		b.ReportMetric((child.Sum("rest_client_requests_total")-aggBefore)/float64(n), "aggregator-requests/changed")
		b.ReportMetric(child.PeakRSS()/(1<<20), "aggregator-peak-MiB")
		child.Stop()
	}
}

// objectBytes is the size of a per-resource report as the apiserver stores it: its JSON with
// managedFields.
func objectBytes(b *testing.B, ctx context.Context, c client.Client, res reports.Resource) float64 {
	var r reportsv1alpha1.ResourceReport
	if err := c.Get(ctx, client.ObjectKey{Namespace: res.Namespace, Name: string(res.UID)}, &r); err != nil {
		b.Fatal(err)
	}
	raw, err := json.Marshal(&r)
	if err != nil {
		b.Fatal(err)
	}
	return float64(len(raw))
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// settle waits for etcd's in-use size to reflect the last writes (the backend commits every
// 100ms).
func settle() { time.Sleep(time.Second) }

// results are what the 5 policies say of the k-th resource: the first fails one resource in ten.
func results(k int, version string) []reports.PolicyResults {
	out := make([]reports.PolicyResults, policies)
	for p := range out {
		// a Kubewarden policy's accepted answer carries no message
		r := openreportsv1alpha1.ReportResult{Result: "pass"}
		if p == 0 && k%10 == 0 {
			r.Result, r.Description = "fail", "the ConfigMap must carry the label team: it has none"
		}
		out[p] = reports.PolicyResults{
			Policy:  reports.PolicyRef{Scope: reportsv1alpha1.PolicyScopeCluster, Name: fmt.Sprintf("bench-policy-%d", p)},
			Version: version,
			Results: []openreportsv1alpha1.ReportResult{r},
		}
	}
	return out
}

// expectedFails is how many resources fail the first policy when the k-th resource's results are
// results(k+shift).
func expectedFails(n, shift int) int {
	fails := 0
	for k := range n {
		if (k+shift)%10 == 0 {
			fails++
		}
	}
	return fails
}

func createConfigMaps(b *testing.B, ctx context.Context, c client.Client, run string, n, perNS int) []reports.Resource {
	out := make([]reports.Resource, n)
	for ns := 0; ns*perNS < n; ns++ {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-ns-%d", run, ns)}}); err != nil {
			b.Fatal(err)
		}
	}
	each(out, func(k int, _ reports.Resource) error {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("%s-ns-%d", run, k/perNS), Name: fmt.Sprintf("cm-%06d", k)},
			Data:       map[string]string{"key": "value"},
		}
		if err := c.Create(ctx, cm); err != nil {
			return err
		}
		out[k] = reports.Resource{APIVersion: "v1", Kind: "ConfigMap", Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID}
		return nil
	})
	return out
}

// each runs f on every element with 16 workers and fails the benchmark on the first error.
func each(items []reports.Resource, f func(int, reports.Resource) error) {
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := int(next.Add(1)) - 1; k < len(items); k = int(next.Add(1)) - 1 {
				if err := f(k, items[k]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		panic(err)
	}
}

// waitConverged polls the aggregated Reports until every policy has a result for all n
// resources and the first policy fails exactly fails of them.
func waitConverged(b *testing.B, ctx context.Context, c client.Client, n, fails int) {
	deadline := time.Now().Add(30 * time.Minute)
	for {
		counts := map[string]openreportsv1alpha1.ReportSummary{}
		for cont := ""; ; {
			var list openreportsv1alpha1.ReportList
			if err := c.List(ctx, &list, client.MatchingLabels{aggregate.LabelAggregatedBy: aggregate.AggregatorName}, client.Limit(20), client.Continue(cont)); err != nil {
				b.Fatal(err)
			}
			for _, r := range list.Items {
				s := counts[r.Labels[aggregate.LabelPolicy]]
				s.Pass += r.Summary.Pass
				s.Fail += r.Summary.Fail
				counts[r.Labels[aggregate.LabelPolicy]] = s
			}
			if cont = list.Continue; cont == "" {
				break
			}
		}
		done := len(counts) == policies
		for p, s := range counts {
			want := 0
			if p == "bench-policy-0" {
				want = fails
			}
			done = done && s.Pass+s.Fail == n && s.Fail == want
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("reports did not converge: %v", counts)
		}
		// Each poll reads every aggregated Report (5 × 1,000 results per namespace): polling
		// faster would load the apiserver the aggregator writes to.
		time.Sleep(2 * time.Second)
	}
}
