package admissionpolicy

import (
	"context"
	"fmt"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// applyDisruptionBudget keeps a PodDisruptionBudget over the replicas (the pods that answer
// admission; the leader is off that path) while the PolicyServer sets minAvailable or
// maxUnavailable, as Kubewarden does, and deletes it once neither is set. The CRD refuses both
// at once.
func (r *policyServerReconciler) applyDisruptionBudget(ctx context.Context, ps *kubewardenv1.PolicyServer, selector map[string]string) error {
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: r.meta(serverObjectName(ps.Name), selector)}
	if ps.Spec.MinAvailable == nil && ps.Spec.MaxUnavailable == nil {
		err := r.nsReader.Get(ctx, client.ObjectKeyFromObject(pdb), pdb)
		if apierrors.IsNotFound(err) || (err == nil && !metav1.IsControlledBy(pdb, ps)) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read PodDisruptionBudget: %w", err)
		}
		if err := r.client.Delete(ctx, pdb); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete the PodDisruptionBudget no longer asked for: %w", err)
		}
		return nil
	}
	return r.ensure(ctx, ps, pdb, func(o client.Object) {
		p := o.(*policyv1.PodDisruptionBudget)
		p.Spec.Selector = &metav1.LabelSelector{MatchLabels: selector}
		p.Spec.MinAvailable, p.Spec.MaxUnavailable = nil, nil
		if ps.Spec.MinAvailable != nil {
			v := *ps.Spec.MinAvailable
			p.Spec.MinAvailable = &v
		} else {
			v := *ps.Spec.MaxUnavailable
			p.Spec.MaxUnavailable = &v
		}
	})
}
