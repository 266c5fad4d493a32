package propagator

import (
	"context"
	"fmt"
	"strings"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/reports/rollup"
)

// summaryIndex indexes the clusters' rolled-up Reports by the replica they summarise, which is
// also their name: <root namespace>.<root name>.
const summaryIndex = "regent.dev/rolled-up-replica"

func summaryKey(o client.Object) []string {
	if o.GetLabels()[rollup.LabelRolledUpBy] != rollup.RollupName {
		return nil
	}
	return []string{o.GetName()}
}

// violations reads, per cluster, the fail count of the root's rolled-up Reports (one per cluster
// namespace, written by the cluster's addon).
func (r *Reconciler) violations(ctx context.Context, root *policyv1.Policy) (map[string]int64, error) {
	var list openreportsv1alpha1.ReportList
	// Only the summary is read; the cached objects are not changed.
	if err := r.Reader.List(ctx, &list, client.MatchingFields{summaryIndex: ReplicaName(root)}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list rolled-up reports of %s/%s: %w", root.Namespace, root.Name, err)
	}
	out := make(map[string]int64, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Namespace] = int64(list.Items[i].Summary.Fail)
	}
	return out, nil
}

// summaryToRoot enqueues the root a rolled-up Report summarises.
func summaryToRoot(_ context.Context, o client.Object) []reconcile.Request {
	if summaryKey(o) == nil {
		return nil
	}
	ns, name, ok := strings.Cut(o.GetName(), ".")
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// summaryFailsChanged passes the summary events that change a root's status: one comes or goes,
// or its fail count changes. A new worst result alone does not wake the root.
var summaryFailsChanged = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return true },
	DeleteFunc: func(event.DeleteEvent) bool { return true },
	UpdateFunc: func(e event.UpdateEvent) bool {
		before, ok1 := e.ObjectOld.(*openreportsv1alpha1.Report)
		after, ok2 := e.ObjectNew.(*openreportsv1alpha1.Report)
		return !ok1 || !ok2 || before.Summary.Fail != after.Summary.Fail
	},
}
