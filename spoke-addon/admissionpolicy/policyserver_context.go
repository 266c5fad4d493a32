package admissionpolicy

import (
	"context"
	"encoding/json"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// contextAwareWants lists what the ClusterAdmissionPolicies served by ps may read: the
// contextAwareResources of the newest generation of each policy naming ps, which its leader
// loads to validate and its replicas are about to serve, and of every generation ps serves now
// (the one a webhook calls) until every replica is Ready for the newest — forever, if the newest
// fails, and even when the newest moved the policy to another PolicyServer. Granting the newest
// alone would make the serving generation's lookups Forbidden the moment a user edits the list.
// AdmissionPolicies have none: their CRD refuses the field.
func (r *policyServerReconciler) contextAwareWants(ctx context.Context, ps string) ([]wantedResource, error) {
	list := &kubewardenv1.ClusterAdmissionPolicyList{}
	if err := r.reader.List(ctx, list, client.MatchingFields{policyServerIndex: ps}); err != nil {
		return nil, fmt.Errorf("list ClusterAdmissionPolicies of %s: %w", ps, err)
	}
	var wants []wantedResource
	for _, p := range list.Items {
		for _, res := range p.Spec.ContextAwareResources {
			wants = append(wants, wantedResource{policy: p.Name, ContextAwareResource: res})
		}
	}
	revs := &kubewardenv1.PolicyRevisionList{}
	if err := r.nsReader.List(ctx, revs, client.InNamespace(r.namespace), client.MatchingLabels{kubewardenv1.PolicyServerLabel: ps}); err != nil {
		return nil, fmt.Errorf("list revisions of %s: %w", ps, err)
	}
	for _, rev := range revs.Items {
		ref := rev.Spec.ObjectReference
		if ref.Kind != kubewardenv1.KindClusterAdmissionPolicy || !r.serving(ctx, rev) {
			continue
		}
		var spec kubewardenv1.PolicySpec
		if err := json.Unmarshal(rev.Spec.Data.Raw, &spec); err != nil {
			return nil, fmt.Errorf("revision %s: data is not a policy spec: %w", rev.Name, err)
		}
		for _, res := range spec.ContextAwareResources {
			wants = append(wants, wantedResource{policy: ref.Name, ContextAwareResource: res})
		}
	}
	return wants, nil
}

// serving tells whether rev is the generation its policy's webhook calls.
func (r *policyServerReconciler) serving(ctx context.Context, rev kubewardenv1.PolicyRevision) bool {
	p := &kubewardenv1.ClusterAdmissionPolicy{}
	if err := r.reader.Get(ctx, client.ObjectKey{Name: rev.Spec.ObjectReference.Name}, p); err != nil {
		return false // gone: no webhook calls it
	}
	uid := rev.Spec.ObjectReference.UID
	return (uid == "" || uid == string(p.UID)) && p.Status.ServingGeneration == rev.Spec.PolicyGeneration
}

// servingServer is the PolicyServer whose revision p's webhook calls, read from that revision;
// "" when none is served or the revision is gone.
func (r *policyServerReconciler) servingServer(ctx context.Context, p *kubewardenv1.ClusterAdmissionPolicy) string {
	if p.Status.ServingGeneration == 0 {
		return ""
	}
	rev := &kubewardenv1.PolicyRevision{}
	name := referenceTo(clusterPolicyKind, p).RevisionName(p.Status.ServingGeneration)
	if err := r.nsReader.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: name}, rev); err != nil {
		return ""
	}
	return rev.Labels[kubewardenv1.PolicyServerLabel]
}
