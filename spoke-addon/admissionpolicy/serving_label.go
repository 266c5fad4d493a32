package admissionpolicy

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// labelServing puts kubewardenv1.ServingLabel on the revision of the serving generation and
// takes it off every other one of the policy, so each replica knows from the revisions it
// watches which generation it must serve to be ready. It runs after the webhook moved: until
// then the label stays on the generation the webhook still calls. Merge patches touch only the
// label, so they never conflict with the replicas' status writes.
func (r *policyReconciler) labelServing(ctx context.Context, revs []kubewardenv1.PolicyRevision, serving int64) error {
	for i := range revs {
		rev := &revs[i]
		want := rev.Spec.PolicyGeneration == serving
		if (rev.Labels[kubewardenv1.ServingLabel] == "true") == want {
			continue
		}
		base := rev.DeepCopy()
		if want {
			if rev.Labels == nil {
				rev.Labels = map[string]string{}
			}
			rev.Labels[kubewardenv1.ServingLabel] = "true"
		} else {
			delete(rev.Labels, kubewardenv1.ServingLabel)
		}
		if err := r.client.Patch(ctx, rev, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("label revision %s serving=%v: %w", rev.Name, want, err)
		}
	}
	return nil
}
