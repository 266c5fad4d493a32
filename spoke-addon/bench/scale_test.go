package bench

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/test/benchproc"
)

// BenchmarkSpokeScale: REGENT_BENCH_POLICIES replicated policies (500) whose ConfigurationPolicies
// cover REGENT_BENCH_OBJECTS objects (5,000; see workload), evaluated by the addon's policy side
// in a child process started once every policy and preexisting object exists. It reports:
//
//   - converge-s: from the child's start until every Policy is Compliant at its generation;
//   - evaluations/s: after each of REGENT_BENCH_CHANGES (3) relabellings of a selected namespace,
//     which re-evaluates every policy with a namespaced template (all of them), until the
//     controller evaluated them all and went quiet;
//   - peak-rss-MiB (VmHWM) and steady-rss-MiB (VmRSS once quiet);
//   - watches: the apiserver's long-running WATCH requests the child added (and, logged, by
//     resource);
//   - restart-s, restart-writes, restart-requests: the child killed (SIGKILL) and started again on
//     the settled cluster, until it evaluated every policy and went quiet; a restart with nothing
//     changed should write nothing;
//   - floor-*: the peer, a process holding informers of the same kinds and nothing else.
//
// REGENT_BENCH_UNRELATED=n adds n ConfigMaps of 8 KiB that no policy names, in a namespace no
// policy selects, to show what the addon's memory does with objects it does not look at.
// REGENT_BENCH_REPORTS=1 runs the report feed and aggregator in the child, as the addon does.
func BenchmarkSpokeScale(b *testing.B) {
	ctrl.SetLogger(logr.Discard())
	policies := benchproc.EnvInt("REGENT_BENCH_POLICIES", 500)
	objects := benchproc.EnvInt("REGENT_BENCH_OBJECTS", 5000)
	w := workload{policies: policies, perTemplate: max(1, objects/(2*policies))}
	h := fleettest.Hub(b)
	ctx := context.Background()
	admin := rest.CopyConfig(h.Config)
	admin.QPS, admin.Burst = -1, 0
	c, err := client.New(admin, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(admin)
	began := time.Now()
	w.create(b, ctx, c, true)
	unrelated(b, ctx, c, benchproc.EnvInt("REGENT_BENCH_UNRELATED", 0), 8<<10)
	b.Logf("workload: %d policies, %d objects covered, %d namespaces; created in %.1fs",
		w.policies, w.objects(), len(w.namespaces()), time.Since(began).Seconds())

	for i := 0; i < b.N; i++ {
		baseWatches := watchesByResource(b, kube)
		child := startSpoke(b, h.Kubeconfig, "addon")
		began := time.Now()
		awaitCompliant(b, ctx, c, w.policies)
		b.ReportMetric(time.Since(began).Seconds(), "converge-s")
		awaitQuiet(child, w.policies)
		b.ReportMetric(time.Since(began).Seconds(), "quiet-s")
		b.ReportMetric(child.PeakRSS()/(1<<20), "peak-rss-MiB")
		b.ReportMetric(child.Writes(), "first-writes")
		watches := watchesByResource(b, kube)
		b.ReportMetric(watchDelta(b, baseWatches, watches), "watches")

		changes := benchproc.EnvInt("REGENT_BENCH_CHANGES", 3)
		var evalSecs, evals float64
		for n := range changes {
			before := child.Sum("regent_configpolicy_evaluations_total")
			t0 := time.Now()
			touchNamespace(b, ctx, c, w.namespaces()[0], n)
			for child.Sum("regent_configpolicy_evaluations_total") < before+float64(w.policies) {
				// Not faster: each scrape costs the child a metrics render.
				time.Sleep(100 * time.Millisecond)
			}
			evalSecs += time.Since(t0).Seconds()
			evals += child.Sum("regent_configpolicy_evaluations_total") - before
			awaitQuiet(child, w.policies)
		}
		if changes > 0 {
			b.ReportMetric(evals/evalSecs, "evaluations/s")
		}
		b.ReportMetric(child.RSS()/(1<<20), "steady-rss-MiB")
		b.ReportMetric(child.CPUSeconds(), "cpu-s")
		logRequests(b, "first run", child)

		child.Kill()
		again := startSpoke(b, h.Kubeconfig, "addon")
		began = time.Now()
		for again.Sum("regent_configpolicy_evaluations_total") < float64(w.policies) {
			time.Sleep(100 * time.Millisecond)
		}
		b.ReportMetric(time.Since(began).Seconds(), "restart-evaluated-s")
		awaitQuiet(again, w.policies)
		b.ReportMetric(time.Since(began).Seconds(), "restart-quiet-s")
		b.ReportMetric(again.Writes(), "restart-writes")
		b.ReportMetric(again.Sum("rest_client_requests_total"), "restart-requests")
		b.ReportMetric(again.PeakRSS()/(1<<20), "restart-peak-rss-MiB")
		logRequests(b, "restarted", again)
		again.Stop()

		if os.Getenv("REGENT_BENCH_PEERS") != "0" {
			peer := startSpoke(b, h.Kubeconfig, "floor")
			// The floor logs when its informers synced; its RSS is read once it settled.
			time.Sleep(10 * time.Second)
			b.ReportMetric(peer.PeakRSS()/(1<<20), "floor-peak-rss-MiB")
			b.ReportMetric(peer.RSS()/(1<<20), "floor-steady-rss-MiB")
			peer.Stop()
		}
	}
}

// startSpoke starts the child process in mode and returns once its metrics answer.
func startSpoke(b *testing.B, kubeconfig, mode string) *benchproc.Process {
	return benchproc.Start(b, "TestSpokeProcess", kubeconfig, envMode+"="+mode)
}

// awaitCompliant polls until every Policy in the cluster namespace is Compliant at its generation.
func awaitCompliant(b *testing.B, ctx context.Context, c client.Client, want int) {
	deadline := time.Now().Add(20 * time.Minute)
	for last := ""; ; time.Sleep(250 * time.Millisecond) {
		list := &policyv1.PolicyList{}
		if err := c.List(ctx, list, client.InNamespace(clusterNamespace)); err != nil {
			b.Fatal(err)
		}
		states := map[policyv1.ComplianceState]int{}
		for _, p := range list.Items {
			if p.Status.LastEvaluatedGeneration == p.Generation {
				states[p.Status.ComplianceState]++
			} else {
				states["not evaluated"]++
			}
		}
		if states[policyv1.Compliant] == want {
			return
		}
		last = fmt.Sprint(states)
		if time.Now().After(deadline) {
			b.Fatalf("policies never all Compliant: %s", last)
		}
	}
}

// awaitQuiet returns once the child evaluated at least want policies, has nothing queued and
// sent no request for 3 seconds.
func awaitQuiet(child *benchproc.Process, want int) {
	for quiet := 0; quiet < 3; {
		r := child.Sum("rest_client_requests_total")
		time.Sleep(time.Second)
		text := child.Metrics()
		done := benchproc.Sum(text, "regent_configpolicy_evaluations_total") >= float64(want)
		queued := benchproc.Sum(text, "workqueue_depth") > 0
		if done && !queued && benchproc.Sum(text, "rest_client_requests_total") == r {
			quiet++
		} else {
			quiet = 0
		}
	}
}

// touchNamespace relabels a namespace every policy selects without changing what any selects.
func touchNamespace(b *testing.B, ctx context.Context, c client.Client, name string, n int) {
	ns := &corev1.Namespace{}
	fleettest.Edit(b, c, withName(ns, name), func(ns *corev1.Namespace) { ns.Labels["touched"] = strconv.Itoa(n) })
}

func withName(ns *corev1.Namespace, name string) *corev1.Namespace { ns.Name = name; return ns }

// watchesByResource reads the apiserver's open WATCH requests per resource.
func watchesByResource(b *testing.B, kube kubernetes.Interface) map[string]float64 {
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_longrunning_requests{") || !strings.Contains(line, `verb="WATCH"`) {
			continue
		}
		res := label(line, "resource")
		if sub := label(line, "subresource"); sub != "" {
			res += "/" + sub
		}
		fields := strings.Fields(line)
		v, _ := strconv.ParseFloat(fields[len(fields)-1], 64)
		out[res] += v
	}
	return out
}

func label(line, name string) string {
	_, rest, ok := strings.Cut(line, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// watchDelta logs the WATCH requests added per resource and returns their total.
func watchDelta(b *testing.B, before, after map[string]float64) float64 {
	var lines []string
	total := 0.0
	for res, n := range after {
		if d := n - before[res]; d != 0 {
			lines = append(lines, fmt.Sprintf("%s %+.0f", res, d))
			total += d
		}
	}
	sort.Strings(lines)
	b.Logf("watches the child opened, by resource: %s", strings.Join(lines, ", "))
	return total
}

func logRequests(b *testing.B, who string, child *benchproc.Process) {
	var lines []string
	for _, line := range strings.Split(child.Metrics(), "\n") {
		for _, family := range []string{"rest_client_requests_total{", "regent_configpolicy_evaluations_total{", "regent_configpolicy_status_writes_total", "controller_runtime_reconcile_total{"} {
			if strings.HasPrefix(line, family) && !strings.HasSuffix(line, " 0") {
				lines = append(lines, line)
			}
		}
	}
	b.Log(who + ":\n" + strings.Join(lines, "\n"))
}
