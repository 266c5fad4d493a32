package propagator_test

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/propagator"
)

// The creator's replica is the one the apiserver stored, and the resourceVersion and generation
// it reads back are the stored ones; the apiserver's refusals come back as its errors.
func TestReplicaCreator_ReadsBackTheStoredVersionAndPassesRefusalsOn(t *testing.T) {
	e := newEnv(t)
	cluster := e.cluster("c1", nil)
	httpClient, err := rest.HTTPClientFor(hubCluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	creator, err := propagator.NewReplicaCreator(hubCluster.Config, httpClient, serializer.NewCodecFactory(testScheme))
	if err != nil {
		t.Fatal(err)
	}
	root := e.rootPolicy("p", policyv1.Enforce, nil)
	replica := func(ns string) *policyv1.Policy {
		return &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: propagator.ReplicaName(root),
			Labels: map[string]string{propagator.RootPolicyLabel: propagator.ReplicaName(root)}}, Spec: *root.Spec.DeepCopy()}
	}
	want := replica(cluster)
	if err := creator.Create(e.ctx, want); err != nil {
		t.Fatalf("create: %v", err)
	}
	stored := &policyv1.Policy{}
	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(want), stored); err != nil {
		t.Fatal(err)
	}
	if want.ResourceVersion == "" || want.ResourceVersion != stored.ResourceVersion || want.Generation != stored.Generation {
		t.Errorf("read back resourceVersion %q generation %d, stored %q %d", want.ResourceVersion, want.Generation, stored.ResourceVersion, stored.Generation)
	}
	if len(stored.Spec.PolicyTemplates) != len(root.Spec.PolicyTemplates) || stored.Spec.RemediationAction != policyv1.Enforce ||
		stored.Labels[propagator.RootPolicyLabel] != propagator.ReplicaName(root) {
		t.Errorf("stored replica %+v is not the one sent", stored)
	}
	if err := creator.Create(e.ctx, replica(cluster)); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create: %v, want AlreadyExists", err)
	}
	err = creator.Create(e.ctx, replica(e.ns+"-no-such-cluster"))
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `namespaces "`+e.ns+`-no-such-cluster" not found`) {
		t.Errorf("create in a missing namespace: %v, want NotFound", err)
	}
	bad := replica(cluster)
	bad.Name = "Not_A_Name"
	if err := creator.Create(e.ctx, bad); !apierrors.IsInvalid(err) {
		t.Errorf("create with an invalid name: %v, want Invalid", err)
	}
}
