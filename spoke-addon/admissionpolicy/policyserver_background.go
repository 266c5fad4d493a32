package admissionpolicy

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// backgroundAudited are the specs of ps's policies with backgroundAudit: what its background
// scan reads (backgroundScanRules).
func (r *policyServerReconciler) backgroundAudited(ctx context.Context, ps string) ([]kubewardenv1.PolicySpec, error) {
	var specs []kubewardenv1.PolicySpec
	caps := &kubewardenv1.ClusterAdmissionPolicyList{}
	if err := r.reader.List(ctx, caps, client.MatchingFields{policyServerIndex: ps}); err != nil {
		return nil, fmt.Errorf("list ClusterAdmissionPolicies of %s: %w", ps, err)
	}
	for _, p := range caps.Items {
		if p.Spec.BackgroundAudit {
			specs = append(specs, p.Spec.PolicySpec)
		}
	}
	aps := &kubewardenv1.AdmissionPolicyList{}
	if err := r.reader.List(ctx, aps, client.MatchingFields{policyServerIndex: ps}); err != nil {
		return nil, fmt.Errorf("list AdmissionPolicies of %s: %w", ps, err)
	}
	for _, p := range aps.Items {
		if p.Spec.BackgroundAudit {
			specs = append(specs, p.Spec)
		}
	}
	capgs := &kubewardenv1.ClusterAdmissionPolicyGroupList{}
	if err := r.reader.List(ctx, capgs, client.MatchingFields{policyServerIndex: ps}); err != nil {
		return nil, fmt.Errorf("list ClusterAdmissionPolicyGroups of %s: %w", ps, err)
	}
	for _, g := range capgs.Items {
		if g.Spec.BackgroundAudit {
			specs = append(specs, groupScanSpec(g.Spec))
		}
	}
	apgs := &kubewardenv1.AdmissionPolicyGroupList{}
	if err := r.reader.List(ctx, apgs, client.MatchingFields{policyServerIndex: ps}); err != nil {
		return nil, fmt.Errorf("list AdmissionPolicyGroups of %s: %w", ps, err)
	}
	for _, g := range apgs.Items {
		if g.Spec.BackgroundAudit {
			specs = append(specs, groupScanSpec(g.Spec))
		}
	}
	return specs, nil
}

// groupScanSpec is what backgroundScanRules reads of a group: the kinds its rules name and
// whether it selects namespaces.
func groupScanSpec(g kubewardenv1.PolicyGroupSpec) kubewardenv1.PolicySpec {
	return kubewardenv1.PolicySpec{Rules: g.Rules, NamespaceSelector: g.NamespaceSelector, ObjectSelector: g.ObjectSelector}
}
