package spokeaddon_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// plantedReplicaNeverReachesTheCluster: someone allowed to write Policies in the cluster
// namespace on the hub creates default.fake, an enforcing Policy that does not carry the
// propagator's replica labels naming it. The addon must not apply it, since an enforced template
// would change the cluster at once. The addon copies only what the propagator acknowledged: its
// replica labels (a replica's creation is the hub's only write for it) or a rollout status.
func (s *suite) plantedReplicaNeverReachesTheCluster(t *testing.T) {
	ctx := context.Background()
	fake := s.replica(t, "fake", func(p *policyv1.Policy) {
		p.Spec.RemediationAction = policyv1.Enforce
		p.Labels["policy.open-cluster-management.io/root-policy"] = "default.other"
	})
	if err := s.hub.Create(ctx, fake); err != nil {
		t.Fatal(err)
	}
	// A replica the hub writes after it: once its copy is here, the addon has seen the fake too.
	later := s.createReplica(t, "after-fake", nil)
	s.localPolicy(t, later.Name, func(*policyv1.Policy) (bool, string) { return true, "" })
	err := s.local.Get(ctx, types.NamespacedName{Namespace: fake.Namespace, Name: fake.Name}, &policyv1.Policy{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("the planted replica reached the managed cluster (get: %v)", err)
	}
	s.templateExists(t, "fake-cfg", false)

	// What the addon waits for is the propagator's acknowledgement, not time: with it, it comes.
	acknowledge(t, s.hub, fake)
	s.localPolicy(t, fake.Name, func(l *policyv1.Policy) (bool, string) {
		return l.Spec.RemediationAction == policyv1.Enforce, "acknowledged replica copied"
	})
	if err := s.hub.Delete(ctx, fake); err != nil {
		t.Fatal(err)
	}
	s.localGone(t, fake.Name)
}
