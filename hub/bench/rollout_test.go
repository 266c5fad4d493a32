package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
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
func spokes(ctx context.Context, c client.WithWatch, replicas client.ListOption) {
	work := make(chan *policyv1.Policy, 1024)
	for w := 0; w < 16; w++ {
		go func() {
			for p := range work {
				patch := fmt.Sprintf(`{"status":{"compliant":"Compliant","lastEvaluatedGeneration":%d}}`, p.Generation)
				_ = c.Status().Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(patch)))
			}
		}()
	}
	defer close(work)
	for ctx.Err() == nil {
		// A watch the apiserver ended may have missed events: answer what the list shows first.
		// The list goes in pages: one of 150,000 replicas in a single response can outlast the
		// request timeout on a busy apiserver. A failure is retried: a spoke that gave up would
		// leave the rollout waiting forever.
		version, err := listEnforced(ctx, c, replicas, work)
		if err != nil {
			retryAfter(ctx, "list replicas", err)
			continue
		}
		w, err := c.Watch(ctx, &policyv1.PolicyList{}, replicas,
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: version}})
		if err != nil {
			retryAfter(ctx, "watch replicas", err)
			continue
		}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*policyv1.Policy)
			if ok && p.Spec.RemediationAction == policyv1.Enforce && p.Status.LastEvaluatedGeneration != p.Generation {
				work <- p
			}
		}
	}
}

// listEnforced sends to work every enforced replica not yet evaluated at its generation, and
// returns the resourceVersion of the list.
func listEnforced(ctx context.Context, c client.Reader, replicas client.ListOption, work chan<- *policyv1.Policy) (string, error) {
	var token string
	for {
		list := &policyv1.PolicyList{}
		if err := c.List(ctx, list, replicas, client.Limit(1000), client.Continue(token)); err != nil {
			return "", err
		}
		for i := range list.Items {
			if p := &list.Items[i]; p.Spec.RemediationAction == policyv1.Enforce && p.Status.LastEvaluatedGeneration != p.Generation {
				work <- p
			}
		}
		if token = list.Continue; token == "" {
			return list.ResourceVersion, nil
		}
	}
}

func retryAfter(ctx context.Context, what string, err error) {
	if ctx.Err() != nil {
		return
	}
	fmt.Fprintf(os.Stderr, "simulated spokes: %s: %v; again in 1s\n", what, err)
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
	}
}
