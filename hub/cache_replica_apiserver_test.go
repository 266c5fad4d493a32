package hub

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	regentscheme "regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/hub/propagator"
)

// The hub holds replicas in a cache of their own, as CachedReplicas, and every other Policy in
// the manager's: no Policy is in both, a label edit moves one from a cache to the other, and
// policy_governance_info reads the two.
func TestHubCaches_ReplicasApartFromRoots(t *testing.T) {
	hub := fleettest.Hub(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl, err := client.New(hub.Config, client.Options{Scheme: regentscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"split-policies", "split-c1"} {
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	root := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "split-policies"},
		Spec: policyv1.PolicySpec{RemediationAction: policyv1.Inform, PolicyTemplates: []*policyv1.PolicyTemplate{}}}
	if err := cl.Create(ctx, root); err != nil {
		t.Fatal(err)
	}
	// The replica of a root this hub does not have, outside any cluster namespace: the hub
	// leaves it alone, as OCM does (a hub managed by another hub).
	replica := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere.q", Namespace: "split-c1",
		Labels: map[string]string{propagator.RootPolicyLabel: "elsewhere.q"}},
		Spec: policyv1.PolicySpec{RemediationAction: policyv1.Enforce, PolicyTemplates: []*policyv1.PolicyTemplate{}}}
	if err := cl.Create(ctx, replica); err != nil {
		t.Fatal(err)
	}
	replica.Status.ComplianceState = policyv1.NonCompliant
	if err := cl.Status().Update(ctx, replica); err != nil {
		t.Fatal(err)
	}

	mgr, err := NewManager(hub.Config, Options{MetricsBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	fleettest.StartManager(t, mgr)
	held := func() (roots, replicas []string) {
		list := &policyv1.PolicyList{}
		if err := mgr.GetCache().List(ctx, list); err != nil {
			return []string{err.Error()}, nil // not started yet
		}
		for _, p := range list.Items {
			roots = append(roots, p.Namespace+"/"+p.Name)
		}
		inf, err := mgr.Replicas.GetInformer(ctx, &policyv1.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range inf.(interface{ GetIndexer() toolscache.Indexer }).GetIndexer().List() {
			r, ok := o.(*propagator.CachedReplica)
			if !ok {
				t.Fatalf("the replica cache holds a %T", o)
			}
			replicas = append(replicas, r.GetNamespace()+"/"+r.GetName())
		}
		return roots, replicas
	}
	fleettest.Eventually(t, 30*time.Second, func() (bool, string) {
		roots, replicas := held()
		return fmt.Sprint(roots) == "[split-policies/p]" && fmt.Sprint(replicas) == "[split-c1/elsewhere.q]",
			fmt.Sprintf("manager's cache %v, replica cache %v", roots, replicas)
	})

	gov := &governanceMetrics{registry: prometheus.NewRegistry(), cache: mgr.GetCache(), replicas: mgr.Replicas, log: logr.Discard()}
	want := `# HELP policy_governance_info ` + governanceInfoHelp + `
# TYPE policy_governance_info gauge
policy_governance_info{cluster_namespace="<null>",policy="p",policy_namespace="split-policies",type="root"} -1
policy_governance_info{cluster_namespace="split-c1",policy="q",policy_namespace="elsewhere",type="propagated"} 1
`
	if err := testutil.GatherAndCompare(gov, strings.NewReader(want), governanceInfoName); err != nil {
		t.Error(err)
	}

	// Without the label it is a root policy like any other.
	replica = &policyv1.Policy{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "split-c1", Name: "elsewhere.q"}, replica); err != nil {
		t.Fatal(err)
	}
	replica.Labels = nil
	if err := cl.Update(ctx, replica); err != nil {
		t.Fatal(err)
	}
	fleettest.Eventually(t, 30*time.Second, func() (bool, string) {
		roots, replicas := held()
		return fmt.Sprint(roots) == "[split-c1/elsewhere.q split-policies/p]" && len(replicas) == 0,
			fmt.Sprintf("manager's cache %v, replica cache %v", roots, replicas)
	})
}
