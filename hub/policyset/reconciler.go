package policyset

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	policyv1beta1 "regent.dev/regent/api/policy/v1beta1"
	"regent.dev/regent/placement/decisions"
)

// placementRuleGVK is OCM's deprecated PlacementRule, whose status.decisions name its clusters.
var placementRuleGVK = schema.GroupVersionKind{Group: "apps.open-cluster-management.io", Version: "v1", Kind: "PlacementRule"}

// Reconciler writes one PolicySet's status.
type Reconciler struct {
	// Client writes the status; reads go to Reader (the manager's cache).
	Client   client.Client
	Reader   client.Reader
	Recorder events.EventRecorder
}

// Reconcile reads the set, its members and the clusters its bindings select, and writes the
// status when it changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	set := &policyv1beta1.PolicySet{}
	if err := r.Reader.Get(ctx, req.NamespacedName, set); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	members := make([]member, 0, len(set.Spec.Policies))
	for _, name := range set.Spec.Policies {
		p := &policyv1.Policy{}
		err := r.Reader.Get(ctx, types.NamespacedName{Namespace: set.Namespace, Name: string(name)}, p)
		switch {
		case apierrors.IsNotFound(err):
			p = nil
		case err != nil:
			return ctrl.Result{}, fmt.Errorf("get policy %s of set %s: %w", name, req, err)
		}
		members = append(members, member{Name: string(name), Policy: p})
	}
	clusters, err := r.clustersOf(ctx, set)
	if err != nil {
		return ctrl.Result{}, err
	}
	status, missing := computeStatus(set, members, clusters)
	for _, name := range missing {
		r.Recorder.Eventf(set, nil, "Warning", "PolicyNotFound", "Aggregate",
			"Policy %s is in PolicySet %s but could not be found in namespace %s", name, set.Name, set.Namespace)
	}
	if equality.Semantic.DeepEqual(set.Status, status) {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(set.DeepCopy())
	set.Status = status
	if err := r.Client.Status().Patch(ctx, set, patch); err != nil {
		return ctrl.Result{}, fmt.Errorf("write status of policy set %s: %w", req, err)
	}
	return ctrl.Result{}, nil
}

// clustersOf returns the clusters chosen by the placements of the bindings whose subject is set.
func (r *Reconciler) clustersOf(ctx context.Context, set *policyv1beta1.PolicySet) (sets.Set[string], error) {
	bindings := &policyv1.PlacementBindingList{}
	if err := r.Reader.List(ctx, bindings, client.InNamespace(set.Namespace)); err != nil {
		return nil, fmt.Errorf("list placement bindings in %s: %w", set.Namespace, err)
	}
	var placements []types.NamespacedName
	out := sets.New[string]()
	for _, b := range bindings.Items {
		if !bindsSet(&b, set.Name) {
			continue
		}
		ref := types.NamespacedName{Namespace: set.Namespace, Name: b.PlacementRef.Name}
		if b.PlacementRef.Kind == "Placement" {
			placements = append(placements, ref)
			continue
		}
		fromRule, err := r.ruleClusters(ctx, ref)
		if err != nil {
			return nil, err
		}
		out = out.Union(fromRule)
	}
	groups, err := decisions.Groups(ctx, r.Reader, placements)
	if err != nil {
		return nil, err
	}
	return out.Union(groups.GetClusters()), nil
}

// ruleClusters are the clusters in a PlacementRule's decisions; none when PlacementRules are not
// served or the rule does not exist.
func (r *Reconciler) ruleClusters(ctx context.Context, ref types.NamespacedName) (sets.Set[string], error) {
	out := sets.New[string]()
	rule := &unstructured.Unstructured{}
	rule.SetGroupVersionKind(placementRuleGVK)
	if err := r.Reader.Get(ctx, ref, rule); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return out, nil
		}
		return nil, fmt.Errorf("get placement rule %s: %w", ref, err)
	}
	list, _, _ := unstructured.NestedSlice(rule.Object, "status", "decisions")
	for _, d := range list {
		if m, ok := d.(map[string]any); ok {
			if c, ok := m["clusterName"].(string); ok && c != "" {
				out.Insert(c)
			}
		}
	}
	return out, nil
}

func bindsSet(b *policyv1.PlacementBinding, set string) bool {
	for _, s := range b.Subjects {
		if s.Kind == "PolicySet" && s.Name == set {
			return true
		}
	}
	return false
}
