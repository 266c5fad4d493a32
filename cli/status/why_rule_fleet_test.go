package status_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/cli/status"
)

// A policy bound through a PlacementRule (OCM's deprecated kind): why reads the rule's
// status.decisions, as the hub does.
func TestWhy_PlacementRuleDecisions(t *testing.T) {
	if _, err := envtest.InstallCRDs(hubCluster.Config, envtest.CRDInstallOptions{Paths: []string{"testdata/placementrule-crd.yaml"}}); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	in, out := e.cluster("in"), e.cluster("out")
	e.startHub()
	rule := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.open-cluster-management.io/v1", "kind": "PlacementRule",
		"metadata": map[string]any{"name": "rule", "namespace": e.ns},
		"spec":     map[string]any{"clusterSelector": map[string]any{}},
	}}
	e.create(rule)
	rule.Object["status"] = map[string]any{"decisions": []any{map[string]any{"clusterName": in, "clusterNamespace": in}}}
	if err := e.c.Status().Update(e.ctx, rule); err != nil {
		t.Fatal(err)
	}
	e.rootPolicy("p", &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All})
	e.create(&policyv1.PlacementBinding{ObjectMeta: metav1.ObjectMeta{Name: "bind-p", Namespace: e.ns},
		PlacementRef: policyv1.PlacementSubject{APIGroup: "apps.open-cluster-management.io", Kind: "PlacementRule", Name: "rule"},
		Subjects:     []policyv1.Subject{{APIGroup: policyv1.GroupVersion.Group, Kind: "Policy", Name: "p"}}})
	e.eventually("the hub records the rule's cluster", func() (bool, string) {
		r := e.root("p")
		return len(r.Status.Status) == 1 && len(r.Status.Placement) == 1, "status not written yet"
	})

	for cluster, chosen := range map[string]bool{in: true, out: false} {
		w, err := status.ReadWhy(e.ctx, e.c, e.ns, "p", cluster, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(w.Placement) != 1 || w.Placement[0].Kind != "PlacementRule" || w.Placement[0].Name != "rule" || w.Placement[0].Chosen != chosen || w.Selected != chosen {
			t.Errorf("%s: placement %+v selected %v, want the PlacementRule rule and chosen %v", cluster, w.Placement, w.Selected, chosen)
		}
	}
}
