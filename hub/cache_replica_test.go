package hub

import (
	"testing"
	"time"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/propagator"
)

// fullReplica sets every field a replica can carry, the rarely set ones included.
func fullReplica() *policyv1.Policy {
	now := metav1.NewTime(time.Unix(1700000000, 0))
	return &policyv1.Policy{
		TypeMeta: metav1.TypeMeta{APIVersion: "policy.open-cluster-management.io/v1", Kind: "Policy"},
		ObjectMeta: metav1.ObjectMeta{Name: "ns.p", Namespace: "c1", UID: "uid-c1", ResourceVersion: "42", Generation: 3,
			CreationTimestamp: now, DeletionTimestamp: &now, DeletionGracePeriodSeconds: ptr.To[int64](0),
			Finalizers:      []string{"example.com/f"},
			OwnerReferences: []metav1.OwnerReference{{Name: "o"}}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}},
			Labels: map[string]string{propagator.RootPolicyLabel: "ns.p", propagator.ClusterNameLabel: "c1",
				propagator.ClusterNSLabel: "c1", "team": "a"},
			Annotations: map[string]string{"policy.open-cluster-management.io/standards": "NIST"}},
		Spec: policyv1.PolicySpec{RemediationAction: policyv1.Enforce, PolicyTemplates: []*policyv1.PolicyTemplate{
			{ObjectDefinition: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigurationPolicy","metadata":{"name":"a"}}`)}}}},
		Status: policyv1.PolicyStatus{ComplianceState: policyv1.NonCompliant, RolloutStatus: policyv1.RolloutTimeOut,
			LastEvaluatedGeneration: 3,
			Conditions: []metav1.Condition{{Type: policyv1.RolloutConditionType, Status: metav1.ConditionTrue, ObservedGeneration: 3,
				Reason: "TimeOut", LastTransitionTime: now}},
			Details: []*policyv1.DetailsPerTemplate{{TemplateMeta: metav1.ObjectMeta{Name: "psp"}, ComplianceState: policyv1.Compliant,
				History: []policyv1.ComplianceHistory{{Message: "Compliant; ClusterAdmissionPolicy psp is Active, serving generation 3 of 3"}}}}},
	}
}

// The replica cache holds a CachedReplica in place of the trimmed Policy: it must give back
// every field the trimmed Policy kept, but for those no reader of the hub's replicas reads
// (TypeMeta, creation time, finalizers, grace period), and take a size class of 176 bytes
// instead of the Policy's 512.
func TestCacheReplica_GivesBackWhatTheTrimmedReplicaKept(t *testing.T) {
	trimmed := fullReplica()
	if _, err := trimPolicy(trimmed); err != nil {
		t.Fatal(err)
	}
	trimmed.TypeMeta, trimmed.CreationTimestamp, trimmed.Finalizers, trimmed.DeletionGracePeriodSeconds = metav1.TypeMeta{}, metav1.Time{}, nil, nil

	obj, err := cacheReplica(fullReplica())
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := obj.(*propagator.CachedReplica)
	if !ok {
		t.Fatalf("the replica cache holds %T", obj)
	}
	if got := rec.Policy(); !equality.Semantic.DeepEqual(got, trimmed) {
		t.Errorf("a cached replica differs from the trimmed one:\n%s", diff.Diff(trimmed, got))
	}
	if size := unsafe.Sizeof(*rec); size > 176 {
		t.Errorf("CachedReplica takes %d bytes", size)
	}
	// client-go may hand the transform what it transformed before.
	if again, err := cacheReplica(rec); err != nil || again != any(rec) {
		t.Errorf("a recorded replica transformed again: %T, %v", again, err)
	}
	// A root is no replica: it stays a Policy.
	root := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	if got, _ := cacheReplica(root); got != any(root) {
		t.Errorf("a root became %T", got)
	}

	// What client-go and controller-runtime read through client.Object.
	var o client.Object = rec
	if o.GetName() != "ns.p" || o.GetNamespace() != "c1" || o.GetUID() != "uid-c1" || o.GetResourceVersion() != "42" ||
		o.GetGeneration() != 3 || o.GetDeletionTimestamp() == nil || o.GetLabels()["team"] != "a" ||
		o.GetAnnotations()["policy.open-cluster-management.io/standards"] != "NIST" {
		t.Errorf("client.Object view of the cached replica: %+v", rec.Policy().ObjectMeta)
	}
	// A deep copy shares nothing the original's readers hold.
	cp := rec.DeepCopyObject().(*propagator.CachedReplica)
	cp.GetLabels()["team"] = "b"
	cp.Policy().Status.Conditions[0].Reason = "changed"
	cp.SetDeletionTimestamp(nil)
	if rec.GetLabels()["team"] != "a" || rec.Policy().Status.Conditions[0].Reason != "TimeOut" || rec.GetDeletionTimestamp() == nil {
		t.Errorf("the deep copy shares state with the cached replica")
	}
	if !equality.Semantic.DeepEqual(rec.Policy(), trimmed) {
		t.Errorf("the cached replica changed through its copy")
	}
}
