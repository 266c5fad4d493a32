package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
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
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

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
	policies := envInt("REGENT_BENCH_POLICIES", 500)
	objects := envInt("REGENT_BENCH_OBJECTS", 5000)
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
	unrelated(b, ctx, c, envInt("REGENT_BENCH_UNRELATED", 0), 8<<10)
	b.Logf("workload: %d policies, %d objects covered, %d namespaces; created in %.1fs",
		w.policies, w.objects(), len(w.namespaces()), time.Since(began).Seconds())

	for i := 0; i < b.N; i++ {
		baseWatches := watchesByResource(b, kube)
		child, addr := startSpoke(b, h.Kubeconfig, "addon")
		began := time.Now()
		awaitCompliant(b, ctx, c, w.policies)
		b.ReportMetric(time.Since(began).Seconds(), "converge-s")
		awaitQuiet(addr, w.policies)
		b.ReportMetric(time.Since(began).Seconds(), "quiet-s")
		b.ReportMetric(peakRSS(child.Process.Pid, "VmHWM")/(1<<20), "peak-rss-MiB")
		b.ReportMetric(scrapeWrites(addr), "first-writes")
		watches := watchesByResource(b, kube)
		b.ReportMetric(watchDelta(b, baseWatches, watches), "watches")

		changes := envInt("REGENT_BENCH_CHANGES", 3)
		var evalSecs, evals float64
		for n := range changes {
			before := scrape(addr, "regent_configpolicy_evaluations_total")
			t0 := time.Now()
			touchNamespace(b, ctx, c, w.namespaces()[0], n)
			for scrape(addr, "regent_configpolicy_evaluations_total") < before+float64(w.policies) {
				// Not faster: each scrape costs the child a metrics render.
				time.Sleep(100 * time.Millisecond)
			}
			evalSecs += time.Since(t0).Seconds()
			evals += scrape(addr, "regent_configpolicy_evaluations_total") - before
			awaitQuiet(addr, w.policies)
		}
		if changes > 0 {
			b.ReportMetric(evals/evalSecs, "evaluations/s")
		}
		b.ReportMetric(peakRSS(child.Process.Pid, "VmRSS")/(1<<20), "steady-rss-MiB")
		b.ReportMetric(cpuSeconds(child.Process.Pid), "cpu-s")
		logRequests(b, "first run", addr)

		_ = child.Process.Kill()
		_ = child.Wait()
		again, addr := startSpoke(b, h.Kubeconfig, "addon")
		began = time.Now()
		for scrape(addr, "regent_configpolicy_evaluations_total") < float64(w.policies) {
			time.Sleep(100 * time.Millisecond)
		}
		b.ReportMetric(time.Since(began).Seconds(), "restart-evaluated-s")
		awaitQuiet(addr, w.policies)
		b.ReportMetric(time.Since(began).Seconds(), "restart-quiet-s")
		b.ReportMetric(scrapeWrites(addr), "restart-writes")
		b.ReportMetric(scrape(addr, "rest_client_requests_total"), "restart-requests")
		b.ReportMetric(peakRSS(again.Process.Pid, "VmHWM")/(1<<20), "restart-peak-rss-MiB")
		logRequests(b, "restarted", addr)
		_ = again.Process.Signal(syscall.SIGTERM)
		_ = again.Wait()

		if os.Getenv("REGENT_BENCH_PEERS") != "0" {
			peer, _ := startSpoke(b, h.Kubeconfig, "floor")
			// The floor logs when its informers synced; its RSS is read once it settled.
			time.Sleep(10 * time.Second)
			b.ReportMetric(peakRSS(peer.Process.Pid, "VmHWM")/(1<<20), "floor-peak-rss-MiB")
			b.ReportMetric(peakRSS(peer.Process.Pid, "VmRSS")/(1<<20), "floor-steady-rss-MiB")
			_ = peer.Process.Signal(syscall.SIGTERM)
			_ = peer.Wait()
		}
	}
}

// startSpoke starts the child process in mode and returns once its metrics answer.
func startSpoke(b *testing.B, kubeconfig, mode string) (*exec.Cmd, string) {
	addr := freeAddr(b)
	child := exec.Command(os.Args[0], "-test.run=^TestSpokeProcess$")
	child.Env = append(os.Environ(), envKubeconfig+"="+kubeconfig, envMetrics+"="+addr, envMode+"="+mode)
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	for metricsText(addr) == "" {
		time.Sleep(20 * time.Millisecond)
	}
	return child, addr
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
func awaitQuiet(addr string, want int) {
	for quiet := 0; quiet < 3; {
		r := scrape(addr, "rest_client_requests_total")
		time.Sleep(time.Second)
		text := metricsText(addr)
		done := sumFamily(strings.NewReader(text), "regent_configpolicy_evaluations_total") >= float64(want)
		queued := sumFamily(strings.NewReader(text), "workqueue_depth") > 0
		if done && !queued && sumFamily(strings.NewReader(text), "rest_client_requests_total") == r {
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

func logRequests(b *testing.B, who, addr string) {
	var lines []string
	for _, line := range strings.Split(metricsText(addr), "\n") {
		for _, family := range []string{"rest_client_requests_total{", "regent_configpolicy_evaluations_total{", "regent_configpolicy_status_writes_total", "controller_runtime_reconcile_total{"} {
			if strings.HasPrefix(line, family) && !strings.HasSuffix(line, " 0") {
				lines = append(lines, line)
			}
		}
	}
	b.Log(who + ":\n" + strings.Join(lines, "\n"))
}

// scrapeWrites sums the child's requests that are not reads.
func scrapeWrites(addr string) float64 {
	sum := 0.0
	for _, line := range strings.Split(metricsText(addr), "\n") {
		if !strings.HasPrefix(line, "rest_client_requests_total{") || strings.Contains(line, `method="GET"`) {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

func freeAddr(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func metricsText(addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return string(raw)
}

func scrape(addr, family string) float64 {
	return sumFamily(strings.NewReader(metricsText(addr)), family)
}

func sumFamily(r io.Reader, family string) float64 {
	sum := 0.0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, family) {
			continue
		}
		rest := line[len(family):]
		if rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// peakRSS reads a memory line of /proc/<pid>/status (VmHWM: peak, VmRSS: now), in bytes.
func peakRSS(pid int, field string) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, field+":") {
			kb, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
			return kb * 1024
		}
	}
	return 0
}

// cpuSeconds reads the user+system CPU time a process has used.
func cpuSeconds(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100
}
