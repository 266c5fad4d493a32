package templatesync

import (
	"context"
	"fmt"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyv1 "regent.dev/regent/api/policy/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	reportsaggregate "regent.dev/regent/reports/aggregate"
)

// withViolations makes a serving admission policy NonCompliant while the cluster's reports hold
// failures for it: it blocks new violations, but existing objects that violate it (created before
// it, or while the webhook failed open) must not leave the hub believing the cluster complies.
// Other kinds report their own compliance (a ConfigurationPolicy is NonCompliant by itself when an
// object violates it), so they are left as they are.
func (r *Reconciler) withViolations(ctx context.Context, obj *unstructured.Unstructured, state policyv1.ComplianceState, message string) (policyv1.ComplianceState, string, error) {
	if obj.GroupVersionKind().Group != KubewardenGroup || state != policyv1.Compliant {
		return state, message, nil
	}
	scope, ns := reportedPolicy(obj.GetKind(), obj.GetNamespace())
	reader := r.Reports
	if reader == nil {
		reader = r.Client
	}
	fails, err := reportedFailures(ctx, reader, scope, ns, obj.GetName())
	if err != nil {
		return state, message, err
	}
	if fails == 0 {
		return state, message, nil
	}
	return policyv1.NonCompliant, fmt.Sprintf("%s; %d existing objects violate %s %s (its policy reports: kubectl get reports -A -l %s=%s); %s",
		policyv1.NonCompliant, fails, obj.GetKind(), obj.GetName(), reportsaggregate.LabelPolicy, reportsv1alpha1.LabelSafe(obj.GetName()),
		admissionPolicyMessage(obj, "")), nil
}

// reportToPolicy maps an aggregated Report to the replicated policy whose template it reports on.
func (r *Reconciler) reportToPolicy(ctx context.Context, o client.Object) []reconcile.Request {
	if o.GetLabels()[reportsaggregate.LabelAggregatedBy] != reportsaggregate.AggregatorName {
		return nil
	}
	scope := reportsv1alpha1.PolicyScope(o.GetLabels()[reportsaggregate.LabelPolicyScope])
	ns := ""
	if scope == reportsv1alpha1.PolicyScopeNamespaced {
		ns = o.GetNamespace()
	}
	owner, err := ReportOwner(ctx, r.Client, r.ClusterNamespace, scope, ns, reportsaggregate.PolicyOf(o))
	if err != nil || owner == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: r.ClusterNamespace, Name: owner}}}
}

// aggregatedReport passes events of the Reports the aggregator wrote. The watch holds metadata
// only, so any change of one wakes its policy, which then reads the counts; the aggregator writes
// a Report only when its content changed.
var aggregatedReport = predicate.NewPredicateFuncs(func(o client.Object) bool {
	return o.GetLabels()[reportsaggregate.LabelAggregatedBy] == reportsaggregate.AggregatorName
})

func reportMetadata(kind string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(openreportsv1alpha1.SchemeGroupVersion.WithKind(kind))
	return m
}
