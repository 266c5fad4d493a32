package propagator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	clocktesting "k8s.io/utils/clock/testing"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	sdkv1beta1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1beta1"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/rollout"
)

// BenchmarkReconcileSettledRoot is the CPU of one reconcile of a root on 3,000 clusters whose
// replicas and status are already what they must be: what the hub pays for every batch of its
// replicas' watch events during a large propagation, and on every later event of the root. It
// runs the reconcile's steps between the cache reads and the writes (the cached root's copy,
// decide, the root status comparison, the replica comparisons), with a Reconciler that has no
// client: any write would panic, so the benchmark also checks that nothing is written.
func BenchmarkReconcileSettledRoot(b *testing.B) {
	for _, strategy := range []clusterv1alpha1.RolloutType{clusterv1alpha1.All, clusterv1alpha1.ProgressivePerGroup} {
		b.Run(string(strategy), func(b *testing.B) {
			planner := rollout.NewPlanner(clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
			cached, in := settledRoot(b, planner, 3000, 10, strategy)
			r := &Reconciler{Workers: 16}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				root := cached.DeepCopy() // the cache's Get
				in.root = root
				p, err := decide(planner, in)
				if err != nil {
					b.Fatal(err)
				}
				if !equality.Semantic.DeepEqual(&root.Status, rootStatusFor(root, p)) {
					b.Fatal("the settled root's status would be written")
				}
				out := r.writeReplicas(ctx, root, p, in.replicas, r.expect.mark())
				if len(out.failed)+len(out.unseen)+len(out.held) > 0 {
					b.Fatalf("writes: %+v", out)
				}
				observe(root, p)
			}
		})
	}
}

// settledRoot builds a root on n clusters in the given number of decision groups, its replicas as
// the cache holds them, and its status as the hub last wrote it. Under a progressive strategy
// every replica enforces and reported Compliant (the rollout succeeded); under All none reported
// yet (a propagation in progress).
func settledRoot(b *testing.B, planner *rollout.Planner, n, groups int, strategy clusterv1alpha1.RolloutType) (*policyv1.Policy, input) {
	b.Helper()
	root := &policyv1.Policy{
		ObjectMeta: metav1.ObjectMeta{Name: "root-0", Namespace: "policies", Generation: 1, ResourceVersion: "1",
			Labels: map[string]string{"team": "bench"}},
		Spec: policyv1.PolicySpec{RemediationAction: policyv1.Enforce,
			PolicyTemplates: []*policyv1.PolicyTemplate{{ObjectDefinition: runtime.RawExtension{
				Raw: []byte(`{"apiVersion":"policy.open-cluster-management.io/v1","kind":"ConfigurationPolicy","metadata":{"name":"c"},"spec":{"remediationAction":"inform","severity":"low","object-templates":[]}}`)}}}},
	}
	if strategy != clusterv1alpha1.All {
		root.Spec.RolloutStrategy = &clusterv1alpha1.RolloutStrategy{Type: strategy,
			ProgressivePerGroup: &clusterv1alpha1.RolloutProgressivePerGroup{}}
	}
	in := input{root: root, replicas: map[string]*CachedReplica{}, groups: sdkv1beta1.ClusterGroupsMap{}}
	for i := range n {
		cluster := fmt.Sprintf("cluster-%05d", i)
		key := sdkv1beta1.GroupKey{GroupName: fmt.Sprintf("g%d", i%groups), GroupIndex: int32(i % groups)}
		if in.groups[key] == nil {
			in.groups[key] = sets.New[string]()
		}
		in.groups[key].Insert(cluster)
		rep := newReplica(root, cluster, &root.Spec)
		rep.ResourceVersion, rep.Generation = fmt.Sprint(1000+i), 1
		if strategy != clusterv1alpha1.All {
			rep.Status.LastEvaluatedGeneration, rep.Status.ComplianceState = 1, policyv1.Compliant
		}
		TrimReplica(rep)
		CompactReplica(rep)
		in.replicas[cluster] = NewCachedReplica(rep)
	}
	in.selected = rollout.ClustersOf(in.groups) // as read() does, once per reconcile
	// The status the hub would have written, pass after pass, until it no longer changes.
	for pass := 0; ; pass++ {
		if pass == 10 {
			b.Fatal("the root's status does not settle")
		}
		in.root = root.DeepCopy()
		p, err := decide(planner, in)
		if err != nil {
			b.Fatal(err)
		}
		status := rootStatusFor(root, p)
		if equality.Semantic.DeepEqual(&root.Status, status) {
			break
		}
		root.Status = *status
	}
	CompactRoot(root)
	return root, in
}
