package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/hub"
	"regent.dev/regent/hub/propagator"
	"regent.dev/regent/test/benchproc"
)

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(clusterv1.Install(s))
	utilruntime.Must(clusterv1beta1.Install(s))
	utilruntime.Must(policyv1.AddToScheme(s))
	return s
}()

// BenchmarkPropagation: 1,000 clusters, 10 root policies, strategy All. Reports seconds until all
// replicas exist and requests for the hub, for a plain client-go loop creating the same objects
// at the same QPS/burst, and for an unthrottled 16-worker loop (the apiserver's ceiling).
//
// REGENT_BENCH_STRATEGY=ProgressivePerGroup rolls the roots out over decision groups of 100
// clusters instead, with simulated spokes answering Compliant (see spokes), and also reports the
// seconds until every root's rollout succeeded. REGENT_BENCH_EDIT=1 edits one root once the fleet
// settled and reports the seconds until every replica carries the edit (and, progressive, until
// its rollout succeeded again) and the hub's requests per changed replica. REGENT_BENCH_BUSY=n
// runs it on a loaded machine: n threads spinning from the fleet's setup to the end.
// REGENT_BENCH_PEERS=ceiling runs only the unthrottled loop, 0 no peer, and rollout
// (progressive) instead a plain client sending a whole rollout's writes beside the same simulated
// spokes (rolloutLoop): the ceiling for the hub's pass 1 and rollout when turns share the
// apiserver with the creates.
func BenchmarkPropagation(b *testing.B) {
	ctrl.SetLogger(logr.Discard())
	clusters, roots := benchproc.EnvInt("REGENT_BENCH_CLUSTERS", 1000), benchproc.EnvInt("REGENT_BENCH_ROOTS", 10)
	strategy := clusterv1alpha1.RolloutType(os.Getenv("REGENT_BENCH_STRATEGY"))
	switch strategy {
	case "":
		strategy = clusterv1alpha1.All
	case clusterv1alpha1.All, clusterv1alpha1.ProgressivePerGroup:
	default:
		b.Fatalf("REGENT_BENCH_STRATEGY=%s: the bench runs All or ProgressivePerGroup", strategy)
	}
	qps, burst := benchproc.EnvInt("REGENT_BENCH_QPS", hub.DefaultQPS), benchproc.EnvInt("REGENT_BENCH_BURST", hub.DefaultBurst)
	h := fleettest.Hub(b)
	ctx := context.Background()
	admin := rest.CopyConfig(h.Config)
	admin.QPS, admin.Burst = -1, 0
	c, err := client.NewWithWatch(admin, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	names := setupFleet(b, ctx, c, clusters)
	want := clusters * roots
	if busy := benchproc.EnvInt("REGENT_BENCH_BUSY", 0); busy > 0 {
		// A loaded machine, the same for the hub and its peers: busy spinning threads.
		defer benchproc.Busy(busy)()
	}

	for i := 0; i < b.N; i++ {
		// The hub first: the peers' objects would look like roots to it.
		run := runHub(b, ctx, c, h.Kubeconfig, names, roots, qps, burst, fmt.Sprintf("run%d", i), strategy)
		hubSecs := run.secs
		b.ReportMetric(hubSecs, "hub-s")
		b.ReportMetric(float64(want)/hubSecs, "hub-replicas/s")
		b.ReportMetric(run.requests/float64(want), "hub-requests/replica")
		b.ReportMetric(run.writes/float64(want), "hub-writes/replica")
		b.ReportMetric(run.rss/(1<<20), "hub-peak-rss-MiB")
		b.ReportMetric(run.rssAtLastReplica/(1<<20), "hub-peak-rss-at-last-replica-MiB")
		b.ReportMetric(run.cpu, "hub-cpu-s")
		b.ReportMetric(run.reconciles, "hub-reconciles")
		if run.rolloutSecs > 0 {
			b.ReportMetric(run.rolloutSecs, "rollout-s")
		}
		if run.rolloutSecs < 0 {
			b.ReportMetric(run.enforced/float64(want), "rollout-enforced-fraction")
			b.ReportMetric(run.turnRate, "turn-enforce-updates/s")
		}
		if run.edited {
			b.ReportMetric(run.editSecs, "edit-s")
			b.ReportMetric(run.editRequests/float64(clusters), "edit-requests/changed-replica")
			b.ReportMetric(run.editWrites/float64(clusters), "edit-writes/changed-replica")
			if run.editRolloutSecs > 0 {
				b.ReportMetric(run.editRolloutSecs, "edit-rollout-s")
			}
		}
		if run.idleSecs > 0 {
			b.ReportMetric(run.idleWrites, "idle-writes")
			b.ReportMetric(run.idleCPU, "idle-cpu-s")
			b.ReportMetric(run.idleCPUAfterFirstMinute, "idle-cpu-s-after-1min")
			b.ReportMetric(run.idleSecs, "idle-s")
		}
		if run.restarted {
			b.ReportMetric(run.restartWrites, "restart-writes")
			b.ReportMetric(run.restartRequests, "restart-requests")
			b.ReportMetric(run.restartSecs, "restart-steady-s")
			b.ReportMetric(run.restartRSS/(1<<20), "restart-peak-rss-MiB")
			b.ReportMetric(run.restartRSSAtSync/(1<<20), "restart-peak-rss-at-sync-MiB")
		}
		switch peers := os.Getenv("REGENT_BENCH_PEERS"); {
		case peers == "0":
		case peers == "rollout" && strategy == clusterv1alpha1.ProgressivePerGroup:
			budget := time.Duration(benchproc.EnvInt("REGENT_BENCH_ROLLOUT_BUDGET", 0)) * time.Second
			peer := rolloutLoop(b, ctx, h.Kubeconfig, names, roots, fmt.Sprintf("rollout%d", i), budget)
			b.ReportMetric(peer.created, "rollout-ceiling-created-s")
			b.ReportMetric(hubSecs/peer.created, "hub/rollout-ceiling-created")
			b.ReportMetric(peer.turnRate, "rollout-ceiling-turn-enforce-updates/s")
			if peer.rolledOut > 0 {
				b.ReportMetric(peer.rolledOut, "rollout-ceiling-s")
			}
			if peer.rolledOut > 0 && run.rolloutSecs > 0 {
				b.ReportMetric(run.rolloutSecs/peer.rolledOut, "hub/rollout-ceiling")
			}
		case peers == "rollout":
			b.Fatal("REGENT_BENCH_PEERS=rollout needs REGENT_BENCH_STRATEGY=ProgressivePerGroup")
		default:
			if peers != "ceiling" {
				limited := rest.CopyConfig(h.Config)
				limited.QPS, limited.Burst = float32(qps), burst
				peer := createLoop(b, ctx, limited, names, roots, fmt.Sprintf("peer%d", i), 16)
				b.ReportMetric(peer, "client-loop-s")
				b.ReportMetric(hubSecs/peer, "hub/client-loop")
			}
			ceiling := createLoop(b, ctx, admin, names, roots, fmt.Sprintf("ceiling%d", i), 16)
			b.ReportMetric(ceiling, "unthrottled-s")
			b.ReportMetric(hubSecs/ceiling, "hub/unthrottled")
		}
	}
}

// hubRun is what one run of the hub measured.
type hubRun struct {
	secs, requests, writes, rss float64
	// rssAtLastReplica is the peak RSS until every replica existed; rss goes on until the hub
	// was quiet, through the scrapes that tell it is (each lists every Policy in
	// policy_governance_info).
	rssAtLastReplica float64
	// cpu is the hub's CPU seconds and reconciles its root reconciles, start to settled.
	cpu, reconciles float64
	// rolloutSecs: until every root's progressive rollout succeeded (0 for strategy All, -1 when
	// REGENT_BENCH_ROLLOUT_BUDGET ran out first).
	rolloutSecs float64
	// enforced is how many replicas the turns had enforced when the budget ran out, turnRate at
	// how many a second over turnsSecs.
	enforced, turnRate, turnsSecs float64
	// edit*: one root edited on the settled fleet (REGENT_BENCH_EDIT=1).
	edited                                              bool
	editSecs, editRolloutSecs, editRequests, editWrites float64
	// idle*: the hub left alone once settled, for REGENT_BENCH_IDLE_SECONDS.
	idleSecs, idleWrites, idleCPU float64
	// idleCPUAfterFirstMinute is the idle CPU from the second minute on.
	idleCPUAfterFirstMinute float64
	// restart*: a second hub process started on the settled fleet (REGENT_BENCH_RESTART=1), until
	// it reconciled every root and went quiet.
	restarted                                               bool
	restartWrites, restartRequests, restartSecs, restartRSS float64
	// restartRSSAtSync is the restarted hub's peak RSS until its caches synced.
	restartRSSAtSync float64
}

// count takes the hub's requests since before, its writes, peak RSS, CPU and reconciles so far.
func (run *hubRun) count(child *benchproc.Process, before float64) {
	run.requests = child.Sum("rest_client_requests_total") - before
	run.writes = child.Sum("regent_propagator_apiserver_writes_total")
	run.rss, run.cpu = child.PeakRSS(), child.CPUSeconds()
	run.reconciles = child.Sum("controller_runtime_reconcile_total")
}

// setupFleet registers clusters (ManagedCluster + namespace) as fast as the apiserver allows.
func setupFleet(b *testing.B, ctx context.Context, c client.Client, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("cluster%04d", i)
	}
	parallel(16, n, func(i int) error {
		for _, o := range []client.Object{
			&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: names[i]}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names[i]}},
		} {
			if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
		return nil
	})
	return names
}

func policy(name, namespace string) *policyv1.Policy {
	tmpl := fmt.Sprintf(`{"apiVersion":"policy.open-cluster-management.io/v1","kind":"ConfigurationPolicy","metadata":{"name":%q},"spec":{"remediationAction":"inform","severity":"low","object-templates":[{"complianceType":"musthave","objectDefinition":{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"prod"}}}]}}`, name)
	return &policyv1.Policy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: policyv1.PolicySpec{RemediationAction: policyv1.Enforce,
			RolloutStrategy: &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All},
			PolicyTemplates: []*policyv1.PolicyTemplate{{ObjectDefinition: runtime.RawExtension{Raw: []byte(tmpl)}}}},
	}
}

// createLoop creates roots×clusters policies with workers goroutines over one client and returns
// the seconds it took.
func createLoop(b *testing.B, ctx context.Context, cfg *rest.Config, clusters []string, roots int, prefix string, workers int) float64 {
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	began := time.Now()
	parallel(workers, len(clusters)*roots, func(i int) error {
		p := policy(fmt.Sprintf("%s.p%d", prefix, i%roots), clusters[i/roots])
		if err := c.Create(ctx, p); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	})
	return time.Since(began).Seconds()
}

// runHub starts the hub as a child process, creates the roots, bindings and decisions, and
// returns the seconds until every replica exists, the hub's requests and writes, and its peak RSS.
func runHub(b *testing.B, ctx context.Context, c client.WithWatch, kubeconfig string, clusters []string, roots, qps, burst int, ns string, strategy clusterv1alpha1.RolloutType) (run hubRun) {
	progressive := strategy == clusterv1alpha1.ProgressivePerGroup
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	for i := 0; i*100 < len(clusters); i++ {
		group := "0"
		if progressive { // a decision group per 100 clusters
			group = strconv.Itoa(i)
		}
		d := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pl-decision-%d", i), Namespace: ns,
			Labels: map[string]string{clusterv1beta1.PlacementLabel: "pl", clusterv1beta1.DecisionGroupIndexLabel: group}}}
		if err := c.Create(ctx, d); err != nil {
			b.Fatal(err)
		}
		for _, name := range clusters[i*100 : min((i+1)*100, len(clusters))] {
			d.Status.Decisions = append(d.Status.Decisions, clusterv1beta1.ClusterDecision{ClusterName: name})
		}
		if err := c.Status().Update(ctx, d); err != nil {
			b.Fatal(err)
		}
	}
	var subjects []policyv1.Subject
	for i := 0; i < roots; i++ {
		subjects = append(subjects, policyv1.Subject{APIGroup: policyv1.GroupVersion.Group, Kind: "Policy", Name: fmt.Sprintf("p%d", i)})
	}
	if err := c.Create(ctx, &policyv1.PlacementBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: ns},
		PlacementRef: policyv1.PlacementSubject{APIGroup: clusterv1beta1.GroupName, Kind: "Placement", Name: "pl"}, Subjects: subjects}); err != nil {
		b.Fatal(err)
	}

	child := startMeasuredHub(b, kubeconfig, qps, burst)
	before := child.Sum("rest_client_requests_total")

	rootNames := make([]string, roots)
	for i := range rootNames {
		rootNames[i] = fmt.Sprintf("%s.p%d", ns, i)
	}
	turns := newTurnTracker(rootNames, clusters)
	if progressive {
		spokeCtx, stopSpokes := context.WithCancel(ctx)
		defer stopSpokes()
		go spokes(spokeCtx, ownConnection(b, kubeconfig), client.HasLabels{propagator.RootPolicyLabel}, turns.seen)
	}

	prefix := ns + "."
	began := time.Now()
	for i := 0; i < roots; i++ {
		p := policy(fmt.Sprintf("p%d", i), ns)
		if progressive {
			p.Spec.RolloutStrategy = &clusterv1alpha1.RolloutStrategy{Type: strategy,
				ProgressivePerGroup: &clusterv1alpha1.RolloutProgressivePerGroup{}}
		}
		if err := c.Create(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
	waitForReplicas(b, ctx, c, prefix, len(clusters)*roots, began)
	run.secs = time.Since(began).Seconds()
	run.rssAtLastReplica = child.PeakRSS()
	milestone("hub: %d replicas created in %.1f s", len(clusters)*roots, run.secs)
	if progressive {
		// REGENT_BENCH_ROLLOUT_BUDGET=s bounds the wait for the rollouts to s seconds after the
		// last replica appeared: a rollout on 150,000 replicas runs for hours on 2 cores, and the
		// peers still measure against the replicas' creation.
		rolloutCtx, stop := ctx, context.CancelFunc(func() {})
		if budget := benchproc.EnvInt("REGENT_BENCH_ROLLOUT_BUDGET", 0); budget > 0 {
			rolloutCtx, stop = context.WithTimeout(ctx, time.Duration(budget)*time.Second)
		}
		turnsBegan, enforcedBefore := time.Now(), enforceUpdates(child)
		for i := 0; i < roots && run.rolloutSecs >= 0; i++ {
			if !awaitRolledOut(b, rolloutCtx, c, ns, fmt.Sprintf("p%d", i), len(clusters), "") {
				run.rolloutSecs = -1
			}
		}
		stop()
		b.Logf("hub turns, as a watch saw them: %s", turns.summary())
		if run.rolloutSecs < 0 {
			// Out of budget: the enforce updates the turns sent, and at what rate.
			run.enforced = enforceUpdates(child)
			run.turnsSecs = time.Since(turnsBegan).Seconds()
			run.turnRate = (run.enforced - enforcedBefore) / run.turnsSecs
			b.Logf("rollout budget spent: %.0f of %d replicas enforced, %.1f enforce updates/s over %.0f s of turns",
				run.enforced, len(clusters)*roots, run.turnRate, run.turnsSecs)
			logRequests(b, "hub at the end of its budget", child)
			logWatchCache(b, ctx, kubeconfig)
			run.count(child, before)
			child.Stop()
			return run
		}
		run.rolloutSecs = time.Since(began).Seconds()
		milestone("hub: every root rolled out in %.1f s", run.rolloutSecs)
	}
	// Let the hub finish whatever follows the creations, then count its requests.
	time.Sleep(3 * time.Second)
	awaitQuiet(child, roots)
	run.count(child, before)
	logRequests(b, "hub", child)

	if idle := benchproc.EnvInt("REGENT_BENCH_IDLE_SECONDS", 0); idle > 0 {
		// By minute: a hub still working through its watch's backlog when the last replica
		// appeared (or relisting because its watch fell too far behind) is told apart from one
		// that is idle.
		w0, cpu0 := child.Writes(), child.CPUSeconds()
		var byMinute []string
		for left, last := idle, cpu0; left > 0; left -= 60 {
			time.Sleep(time.Duration(min(left, 60)) * time.Second)
			now := child.CPUSeconds()
			byMinute = append(byMinute, strconv.FormatFloat(now-last, 'f', 1, 64))
			if left == idle {
				run.idleCPUAfterFirstMinute = -now
			}
			last = now
		}
		run.idleSecs = float64(idle)
		run.idleWrites = child.Writes() - w0
		run.idleCPU = child.CPUSeconds() - cpu0
		run.idleCPUAfterFirstMinute += child.CPUSeconds()
		b.Logf("idle hub CPU seconds by minute: %s", strings.Join(byMinute, ", "))
		logRequests(b, "idle hub", child)
	}
	if os.Getenv("REGENT_BENCH_EDIT") == "1" {
		run.edited = true
		run.editSecs, run.editRolloutSecs, run.editRequests, run.editWrites = editRoot(b, ctx, c, ns, "p0", len(clusters), child, progressive)
		logRequests(b, "hub after the edit", child)
	}
	child.Stop()

	if os.Getenv("REGENT_BENCH_RESTART") == "1" {
		began := time.Now()
		again := startMeasuredHub(b, kubeconfig, qps, burst)
		run.restartRSSAtSync = again.PeakRSS()
		awaitQuiet(again, roots)
		run.restarted = true
		run.restartSecs = time.Since(began).Seconds()
		run.restartRequests = again.Sum("rest_client_requests_total")
		run.restartWrites = again.Writes()
		run.restartRSS = again.PeakRSS()
		logRequests(b, "restarted hub", again)
		again.Stop()
	}
	return run
}

// startMeasuredHub starts the hub as a child process and returns once its controller started,
// which is after its caches synced (controller-runtime publishes its reconcile counters then).
func startMeasuredHub(b *testing.B, kubeconfig string, qps, burst int) *benchproc.Process {
	child := benchproc.Start(b, "TestHubProcess", kubeconfig, envQPS+"="+strconv.Itoa(qps), envBurst+"="+strconv.Itoa(burst))
	for !strings.Contains(child.Metrics(), `controller_runtime_reconcile_total{controller="root-policy"`) {
		time.Sleep(100 * time.Millisecond)
	}
	return child
}

// awaitQuiet returns once the hub reconciled every root at least once, has nothing queued, and
// sent no request for 5 seconds. One scrape a second: at 150,000 replicas a scrape costs the hub
// ~75 ms of CPU (policy_governance_info), which the bench would otherwise count as the hub's.
func awaitQuiet(child *benchproc.Process, roots int) {
	last := child.Sum("rest_client_requests_total")
	for quiet := 0; quiet < 5; {
		time.Sleep(time.Second)
		text := child.Metrics()
		requests := benchproc.Sum(text, "rest_client_requests_total")
		done := benchproc.Sum(text, "controller_runtime_reconcile_total") >= float64(roots)
		queued := benchproc.Sum(text, "workqueue_depth") > 0
		if done && !queued && requests == last {
			quiet++
		} else {
			quiet = 0
		}
		last = requests
	}
}

// logWatchCache logs what the apiserver says of its Policy watch cache and the watchers it closed
// for not keeping up: a hub watch closed that way, then resumed from a version the cache no
// longer holds, is a relist.
func logWatchCache(b *testing.B, ctx context.Context, kubeconfig string) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		b.Logf("apiserver metrics: %v", err)
		return
	}
	var lines []string
	for _, line := range benchproc.Lines(string(raw), "apiserver_terminated_watchers_total", "apiserver_watch_cache_events_dispatched_total", "apiserver_watch_cache_initializations_total") {
		if strings.Contains(line, `resource="policies"`) {
			lines = append(lines, line)
		}
	}
	b.Log("apiserver watch cache of policies:\n" + strings.Join(lines, "\n"))
}

// enforceUpdates is the hub's replica updates so far: after the first pass creates every replica
// as inform, each is a group's turn enforcing a replica.
func enforceUpdates(child *benchproc.Process) float64 {
	return benchproc.Sum(child.Metrics(), `regent_propagator_apiserver_writes_total{resource="policies",verb="update"}`)
}

func logRequests(b *testing.B, who string, child *benchproc.Process) {
	var lines []string
	for _, line := range strings.Split(child.Metrics(), "\n") {
		if strings.HasPrefix(line, "regent_propagator_apiserver_writes_total{") || strings.HasPrefix(line, "rest_client_requests_total{") ||
			strings.HasPrefix(line, "regent_propagator_policy_cache_relists_total ") {
			lines = append(lines, line)
		}
	}
	b.Log(who + " requests:\n" + strings.Join(lines, "\n"))
}

// waitForReplicas counts replicas as the apiserver announces their creation; a watch the apiserver
// ends is resumed from the last version seen. Each watch lasts at most a minute (a watch stream
// once sat silent for seven minutes at 28,000 of 30,000 replicas while every replica existed),
// and one the apiserver can no longer resume (an error event, e.g. 410 Gone) is replaced by a
// list.
func waitForReplicas(b *testing.B, ctx context.Context, c client.WithWatch, prefix string, want int, began time.Time) {
	seen := map[string]bool{}
	rv := ""
	count := func(p *policyv1.Policy) {
		if !strings.HasPrefix(p.Name, prefix) || seen[p.Namespace+"/"+p.Name] {
			return
		}
		seen[p.Namespace+"/"+p.Name] = true
		if len(seen)%2000 == 0 {
			b.Logf("%d replicas after %.1fs", len(seen), time.Since(began).Seconds())
		}
	}
	for len(seen) < want {
		if rv == "" {
			list := &policyv1.PolicyList{}
			if err := retrying(ctx, "list the replicas", func() error { return c.List(ctx, list, client.HasLabels{propagator.RootPolicyLabel}) }); err != nil {
				b.Fatal(err)
			}
			for i := range list.Items {
				count(&list.Items[i])
			}
			rv = list.ResourceVersion
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		w, err := c.Watch(wctx, &policyv1.PolicyList{}, client.HasLabels{propagator.RootPolicyLabel},
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		if err != nil {
			cancel()
			retryAfter(ctx, "watch the replicas", err)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				rv = ""
				break
			}
			p, ok := ev.Object.(*policyv1.Policy)
			if !ok {
				continue
			}
			rv = p.ResourceVersion
			if ev.Type == watch.Added {
				count(p)
			}
			if len(seen) >= want {
				break
			}
		}
		w.Stop()
		cancel()
	}
}

// ownConnection is an unthrottled client on a connection of its own: the simulated spokes' 16
// writers and their watch then share no HTTP/2 connection with the bench's own watches and polls
// (real spokes each have theirs), so neither can hold the other's requests up.
func ownConnection(b *testing.B, kubeconfig string) client.WithWatch {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	// A Dial function makes client-go build a transport for this config alone instead of
	// reusing the cached one of an equal config.
	cfg.Dial = (&net.Dialer{}).DialContext
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func parallel(workers, n int, fn func(int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		panic(first)
	}
}
