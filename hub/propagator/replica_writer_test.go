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

// The writer's replica is the one the apiserver stored, and the resourceVersion and generation
// it reads back are the stored ones, after a create and after an update; the apiserver's refusals
// come back as its errors.
func TestReplicaWriter_ReadsBackTheStoredVersionAndPassesRefusalsOn(t *testing.T) {
	e := newEnv(t)
	cluster := e.cluster("c1", nil)
	httpClient, err := rest.HTTPClientFor(hubCluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	writer, err := propagator.NewReplicaWriter(hubCluster.Config, httpClient, serializer.NewCodecFactory(testScheme))
	if err != nil {
		t.Fatal(err)
	}
	root := e.rootPolicy("p", policyv1.Enforce, nil)
	replica := func(ns string) *policyv1.Policy {
		return &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: propagator.ReplicaName(root),
			Labels: map[string]string{propagator.RootPolicyLabel: propagator.ReplicaName(root)}}, Spec: *root.Spec.DeepCopy()}
	}
	want := replica(cluster)
	if err := writer.Create(e.ctx, want); err != nil {
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
	if err := writer.Create(e.ctx, replica(cluster)); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create: %v, want AlreadyExists", err)
	}
	err = writer.Create(e.ctx, replica(e.ns+"-no-such-cluster"))
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `namespaces "`+e.ns+`-no-such-cluster" not found`) {
		t.Errorf("create in a missing namespace: %v, want NotFound", err)
	}
	bad := replica(cluster)
	bad.Name = "Not_A_Name"
	if err := writer.Create(e.ctx, bad); !apierrors.IsInvalid(err) {
		t.Errorf("create with an invalid name: %v, want Invalid", err)
	}

	created := want.ResourceVersion
	want.Spec.RemediationAction = policyv1.Inform
	if err := writer.Update(e.ctx, want); err != nil {
		t.Fatalf("update: %v", err)
	}
	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(want), stored); err != nil {
		t.Fatal(err)
	}
	if want.ResourceVersion == created || want.ResourceVersion != stored.ResourceVersion || want.Generation != stored.Generation ||
		stored.Generation != 2 || stored.Spec.RemediationAction != policyv1.Inform {
		t.Errorf("after the update read back %q generation %d, stored %q %d %s", want.ResourceVersion, want.Generation,
			stored.ResourceVersion, stored.Generation, stored.Spec.RemediationAction)
	}
	stale := replica(cluster)
	stale.ResourceVersion = created
	if err := writer.Update(e.ctx, stale); !apierrors.IsConflict(err) {
		t.Errorf("update conditioned on an older version: %v, want Conflict", err)
	}
}

// BenchmarkReplicaUpdate is one replica update against the package's apiserver, through a typed
// client (which decodes the whole answer) and through ReplicaWriter: the time is mostly the
// apiserver's, the allocations are the hub's alone.
func BenchmarkReplicaUpdate(b *testing.B) {
	e := newEnv(b)
	cluster := e.cluster("c1", nil)
	root := e.rootPolicy("p", policyv1.Enforce, nil)
	httpClient, err := rest.HTTPClientFor(hubCluster.Config)
	if err != nil {
		b.Fatal(err)
	}
	writer, err := propagator.NewReplicaWriter(hubCluster.Config, httpClient, serializer.NewCodecFactory(testScheme))
	if err != nil {
		b.Fatal(err)
	}
	p := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: propagator.ReplicaName(root),
		Labels: map[string]string{propagator.RootPolicyLabel: propagator.ReplicaName(root)}}, Spec: *root.Spec.DeepCopy()}
	if err := writer.Create(e.ctx, p); err != nil {
		b.Fatal(err)
	}
	for name, update := range map[string]func(*policyv1.Policy) error{
		"typed client":  func(p *policyv1.Policy) error { return e.c.Update(e.ctx, p) },
		"ReplicaWriter": func(p *policyv1.Policy) error { return writer.Update(e.ctx, p) },
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := range b.N {
				want := &policyv1.Policy{ObjectMeta: *p.ObjectMeta.DeepCopy(), Spec: *root.Spec.DeepCopy()}
				want.Spec.RemediationAction = []policyv1.RemediationAction{policyv1.Inform, policyv1.Enforce}[i%2]
				if err := update(want); err != nil {
					b.Fatal(err)
				}
				p.ResourceVersion = want.ResourceVersion
			}
		})
	}
}
