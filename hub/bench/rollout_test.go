package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/hub/propagator"
	"regent.dev/regent/test/benchproc"
)

// BenchmarkRolloutPerGroup: one enforce root over 10 decision groups with a soak time, every spoke
// answering Compliant as soon as its replica is enforced. Reports the time beyond the sum of the
// soak times, per group: what the hub adds to each step of a progressive rollout.
func BenchmarkRolloutPerGroup(b *testing.B) {
	clusters, groups := benchproc.EnvInt("REGENT_BENCH_CLUSTERS", 1000), 10
	soak := time.Duration(benchproc.EnvInt("REGENT_BENCH_SOAK_SECONDS", 2)) * time.Second
	h := fleettest.Hub(b)
	ctx := context.Background()
	admin := rest.CopyConfig(h.Config)
	admin.QPS, admin.Burst = -1, 0
	c, err := client.NewWithWatch(admin, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	names := setupFleet(b, ctx, c, clusters)
	for i := 0; i < b.N; i++ {
		ns := fmt.Sprintf("pergroup%d", i)
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
		per := clusters / groups
		for g := 0; g < groups; g++ {
			d := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pl-decision-%d", g), Namespace: ns,
				Labels: map[string]string{clusterv1beta1.PlacementLabel: "pl", clusterv1beta1.DecisionGroupIndexLabel: strconv.Itoa(g)}}}
			if err := c.Create(ctx, d); err != nil {
				b.Fatal(err)
			}
			for _, name := range names[g*per : (g+1)*per] {
				d.Status.Decisions = append(d.Status.Decisions, clusterv1beta1.ClusterDecision{ClusterName: name})
			}
			if err := c.Status().Update(ctx, d); err != nil {
				b.Fatal(err)
			}
		}
		if err := c.Create(ctx, &policyv1.PlacementBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: ns},
			PlacementRef: policyv1.PlacementSubject{APIGroup: clusterv1beta1.GroupName, Kind: "Placement", Name: "pl"},
			Subjects:     []policyv1.Subject{{APIGroup: policyv1.GroupVersion.Group, Kind: "Policy", Name: "p"}}}); err != nil {
			b.Fatal(err)
		}
		stopHub := startHubProcess(b, h.Kubeconfig)
		spokeCtx, stopSpokes := context.WithCancel(ctx)
		go spokes(spokeCtx, c, client.MatchingLabels{propagator.RootPolicyLabel: ns + ".p"})

		root := policy("p", ns)
		root.Spec.RolloutStrategy = &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup,
			ProgressivePerGroup: &clusterv1alpha1.RolloutProgressivePerGroup{RolloutConfig: clusterv1alpha1.RolloutConfig{
				MinSuccessTime: metav1.Duration{Duration: soak}}}}
		began := time.Now()
		if err := c.Create(ctx, root); err != nil {
			b.Fatal(err)
		}
		for {
			r := &policyv1.Policy{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "p"}, r); err != nil {
				b.Fatal(err)
			}
			if r.Status.RolloutStatus == policyv1.RolloutSucceeded && len(r.Status.Status) == clusters {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		total := time.Since(began)
		stopSpokes()
		stopHub()
		beyond := total - time.Duration(groups)*soak
		b.ReportMetric(total.Seconds(), "rollout-s")
		b.ReportMetric(beyond.Seconds(), "beyond-soak-s")
		b.ReportMetric(beyond.Seconds()/float64(groups), "beyond-soak-s/group")
	}
}

// startHubProcess runs the hub as a child process with the default options; the returned func
// stops it.
func startHubProcess(b *testing.B, kubeconfig string) func() {
	return benchproc.Start(b, "TestHubProcess", kubeconfig).Stop
}

// spokes plays every managed cluster: an enforced replica (of those replicas selects) not yet
// evaluated at its generation is reported Compliant at once.
//
// Its watch never waits on the answers (see follow): replicas waiting for an answer go to a
// deduplicating queue that 16 writers drain. observers see every replica the watch delivers.
func spokes(ctx context.Context, c client.WithWatch, replicas client.ListOption, observers ...func(*policyv1.Policy)) {
	s := &spokeSim{queue: workqueue.NewTyped[types.NamespacedName](), generation: map[types.NamespacedName]int64{}}
	defer s.queue.ShutDown()
	for w := 0; w < 16; w++ {
		go s.answer(ctx, c)
	}
	go s.report(ctx)
	follow(ctx, c, replicas, func(p *policyv1.Policy) {
		s.offer(p)
		for _, o := range observers {
			o(p)
		}
	}, &s.lists, &s.watches)
}

// follow hands seen every replica that replicas selects, from a paged list and then from a watch,
// until ctx ends; lists and watches count what it started.
//
// seen must not block: a watcher that does is stopped by the apiserver (at most 100 events
// buffered for a custom resource), and a relist of 150,000 replicas costs the apiserver more than
// the turns it was meant to answer. A watch that ended is resumed from the last version it
// delivered; only an error event (an expired version, a broken stream) lists again, as client-go's
// reflector does.
func follow(ctx context.Context, c client.WithWatch, replicas client.ListOption, seen func(*policyv1.Policy), lists, watches *atomic.Int64) {
	var version string
	for ctx.Err() == nil {
		if version == "" {
			// The list goes in pages: one of 150,000 replicas in a single response can outlast
			// the request timeout on a busy apiserver. A failure is retried: a follower that gave
			// up would leave a rollout waiting forever.
			lists.Add(1)
			v, err := listPaged(ctx, c, replicas, seen)
			if err != nil {
				retryAfter(ctx, "list replicas", err)
				continue
			}
			version = v
		}
		w, err := c.Watch(ctx, &policyv1.PolicyList{}, replicas,
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: version, AllowWatchBookmarks: true}})
		if err != nil {
			retryAfter(ctx, "watch replicas", err)
			continue
		}
		watches.Add(1)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*policyv1.Policy)
			if !ok { // an error event: the version is gone (410) or the stream broke; list again
				version = ""
				break
			}
			version = p.ResourceVersion
			if ev.Type != watch.Bookmark {
				seen(p)
			}
		}
		w.Stop()
	}
}

// spokeSim is the simulated spokes' state: the replicas waiting for an answer, and counts that
// tell a slow apiserver from a slow hub.
type spokeSim struct {
	queue                   workqueue.TypedInterface[types.NamespacedName]
	mu                      sync.Mutex
	generation              map[types.NamespacedName]int64
	patches, lists, watches atomic.Int64
}

func (s *spokeSim) offer(p *policyv1.Policy) {
	if p.Spec.RemediationAction != policyv1.Enforce || p.Status.LastEvaluatedGeneration == p.Generation {
		return
	}
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	s.mu.Lock()
	s.generation[key] = max(s.generation[key], p.Generation)
	s.mu.Unlock()
	s.queue.Add(key)
}

func (s *spokeSim) answer(ctx context.Context, c client.Client) {
	for {
		key, shutdown := s.queue.Get()
		if shutdown {
			return
		}
		s.mu.Lock()
		generation := s.generation[key]
		delete(s.generation, key)
		s.mu.Unlock()
		if generation == 0 { // answered already, in the turn that took this key's last offer
			s.queue.Done(key)
			continue
		}
		p := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
		patch := fmt.Sprintf(`{"status":{"compliant":"Compliant","lastEvaluatedGeneration":%d}}`, generation)
		// A failed answer is offered again a second later: a watch resumed from its version sends
		// no event for it, and a rollout would wait on it forever. A 404 means the hub removed it.
		switch err := c.Status().Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(patch))); {
		case err == nil:
			s.patches.Add(1)
		case !apierrors.IsNotFound(err) && ctx.Err() == nil:
			s.mu.Lock()
			s.generation[key] = max(s.generation[key], generation)
			s.mu.Unlock()
			time.AfterFunc(time.Second, func() { s.queue.Add(key) })
		}
		s.queue.Done(key)
	}
}

// report prints the counts once a minute while they change.
func (s *spokeSim) report(ctx context.Context) {
	var last int64 = -1
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Minute):
		}
		if n := s.patches.Load(); n != last {
			last = n
			fmt.Fprintf(os.Stderr, "simulated spokes: %d answers, %d waiting, %d lists, %d watches\n",
				n, s.queue.Len(), s.lists.Load(), s.watches.Load())
		}
	}
}

// listPaged hands seen every replica the list shows and returns the list's resourceVersion.
func listPaged(ctx context.Context, c client.Reader, replicas client.ListOption, seen func(*policyv1.Policy)) (string, error) {
	var token string
	for {
		list := &policyv1.PolicyList{}
		if err := c.List(ctx, list, replicas, client.Limit(1000), client.Continue(token)); err != nil {
			return "", err
		}
		for i := range list.Items {
			seen(&list.Items[i])
		}
		if token = list.Continue; token == "" {
			return list.ResourceVersion, nil
		}
	}
}

// milestone says on stderr, at once, what a run reached: b.Logf holds a benchmark's lines until
// it ends, and a rollout at 150,000 may be stopped before that.
func milestone(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().UTC().Format(time.TimeOnly), fmt.Sprintf(format, args...))
}

func retryAfter(ctx context.Context, what string, err error) {
	if ctx.Err() != nil {
		return
	}
	fmt.Fprintf(os.Stderr, "bench: %s: %v; again in 1s\n", what, err)
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
	}
}
