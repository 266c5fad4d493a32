package hub

import (
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/propagator"
)

func TestTrimPolicy_DropsReplicaHistoryButKeepsRootsWhole(t *testing.T) {
	details := []*policyv1.DetailsPerTemplate{{ComplianceState: policyv1.Compliant}}
	replica := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{propagator.RootPolicyLabel: "ns.p"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}},
		Status: policyv1.PolicyStatus{ComplianceState: policyv1.Compliant, LastEvaluatedGeneration: 3, Details: details}}
	root := &policyv1.Policy{Status: policyv1.PolicyStatus{Details: details}}
	if _, err := trimPolicy(replica); err != nil {
		t.Fatal(err)
	}
	if _, err := trimPolicy(root); err != nil {
		t.Fatal(err)
	}
	if replica.Status.Details != nil || replica.ManagedFields != nil {
		t.Errorf("replica keeps details %v, managed fields %v", replica.Status.Details, replica.ManagedFields)
	}
	if replica.Status.ComplianceState != policyv1.Compliant || replica.Status.LastEvaluatedGeneration != 3 {
		t.Errorf("replica lost what the rollout reads: %+v", replica.Status)
	}
	if root.Status.Details == nil {
		t.Errorf("a root's status must stay whole: the hub writes it back")
	}
}

func TestTrimPolicy_ReplacesAReplicaSpecByItsHash(t *testing.T) {
	spec := func(tmpl string, action policyv1.RemediationAction) policyv1.PolicySpec {
		return policyv1.PolicySpec{RemediationAction: action, PolicyTemplates: []*policyv1.PolicyTemplate{
			{ObjectDefinition: runtime.RawExtension{Raw: []byte(tmpl)}}}}
	}
	replica := func(s policyv1.PolicySpec) *policyv1.Policy {
		p := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{propagator.RootPolicyLabel: "ns.p"}}, Spec: s}
		if _, err := trimPolicy(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	want := spec(`{"kind":"ConfigurationPolicy","apiVersion":"v1","metadata":{"name":"a"}}`, policyv1.Inform)
	same := replica(spec(`{"apiVersion": "v1", "kind": "ConfigurationPolicy", "metadata": {"name": "a"}}`, policyv1.Inform))
	if same.Spec.PolicyTemplates != nil {
		t.Errorf("cached replica keeps its templates")
	}
	if same.Spec.RemediationAction != policyv1.Inform {
		t.Errorf("cached replica lost its remediation action: %q", same.Spec.RemediationAction)
	}
	if same.GenerateName != propagator.SpecHash(&want) {
		t.Errorf("same spec, other key order: hash %q, want %q", same.GenerateName, propagator.SpecHash(&want))
	}
	for name, edited := range map[string]policyv1.PolicySpec{
		"remediation": spec(`{"kind":"ConfigurationPolicy","apiVersion":"v1","metadata":{"name":"a"}}`, policyv1.Enforce),
		"template":    spec(`{"kind":"ConfigurationPolicy","apiVersion":"v1","metadata":{"name":"b"}}`, policyv1.Inform),
	} {
		if got := replica(edited).GenerateName; got == same.GenerateName {
			t.Errorf("%s edited: same hash %q", name, got)
		}
	}
	root := &policyv1.Policy{Spec: want}
	if _, err := trimPolicy(root); err != nil {
		t.Fatal(err)
	}
	if root.Spec.PolicyTemplates == nil || root.GenerateName != "" {
		t.Errorf("a root's spec must stay whole")
	}
}

func TestTrimPolicy_IsIdempotent(t *testing.T) {
	p := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{propagator.RootPolicyLabel: "ns.p"}},
		Spec: policyv1.PolicySpec{RemediationAction: policyv1.Inform}}
	if _, err := trimPolicy(p); err != nil {
		t.Fatal(err)
	}
	first := p.GenerateName
	// client-go may pass an object it already transformed through the transform again.
	if _, err := trimPolicy(p); err != nil {
		t.Fatal(err)
	}
	if p.GenerateName != first {
		t.Errorf("second pass hashed the emptied spec: %q, was %q", p.GenerateName, first)
	}
}

func TestTrimReport_KeepsTheSummaryDropsTheWorstResults(t *testing.T) {
	r := &openreportsv1alpha1.Report{ObjectMeta: metav1.ObjectMeta{Name: "ns.p", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}},
		Summary: openreportsv1alpha1.ReportSummary{Pass: 2, Fail: 1},
		Results: []openreportsv1alpha1.ReportResult{{Policy: "p", Result: "fail"}}}
	if _, err := trimReport(r); err != nil {
		t.Fatal(err)
	}
	if r.Results != nil || r.ManagedFields != nil || r.Summary.Fail != 1 || r.Summary.Pass != 2 || r.Name != "ns.p" {
		t.Errorf("trimmed report %+v", r)
	}
}

// Each field below is read by the hub from its cached replicas: the propagator (root label, spec
// hash, remediation, labels and annotations against the ones it wants, generation and compliance
// for the rollout, resourceVersion for its expectations, uid for the precondition of a delete, the
// IV of an encrypted hub template), policy_governance_info (name, namespace, compliance) and the
// dashboard (root label, serving details).
func TestTrimPolicy_KeepsWhatEachReaderNeeds(t *testing.T) {
	replica := func(cluster string) *policyv1.Policy {
		p := &policyv1.Policy{
			ObjectMeta: metav1.ObjectMeta{Name: "ns.p", Namespace: cluster, UID: "uid-" + types.UID(cluster), ResourceVersion: "42", Generation: 3,
				Labels: map[string]string{propagator.RootPolicyLabel: "ns.p", propagator.ClusterNameLabel: cluster,
					propagator.ClusterNSLabel: cluster, "team": "a"},
				Annotations: map[string]string{"policy.open-cluster-management.io/standards": "NIST"}},
			Spec: policyv1.PolicySpec{RemediationAction: policyv1.Enforce},
			Status: policyv1.PolicyStatus{ComplianceState: policyv1.NonCompliant, RolloutStatus: policyv1.RolloutSucceeded,
				LastEvaluatedGeneration: 3},
		}
		if _, err := trimPolicy(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := replica(strings.Clone("c1")), replica(strings.Clone("c2"))
	if a.Name != "ns.p" || a.Namespace != "c1" || a.UID != "uid-c1" || a.ResourceVersion != "42" || a.Generation != 3 {
		t.Errorf("identity lost: %+v", a.ObjectMeta)
	}
	if a.Labels[propagator.RootPolicyLabel] != "ns.p" || a.Labels["team"] != "a" || a.Annotations["policy.open-cluster-management.io/standards"] != "NIST" {
		t.Errorf("metadata lost: labels %v, annotations %v", a.Labels, a.Annotations)
	}
	if a.Spec.RemediationAction != policyv1.Enforce || a.Status.ComplianceState != policyv1.NonCompliant ||
		a.Status.RolloutStatus != policyv1.RolloutSucceeded || a.Status.LastEvaluatedGeneration != 3 {
		t.Errorf("what the rollout reads is lost: spec %+v, status %+v", a.Spec, a.Status)
	}
	if typ, policy, policyNS, clusterNS, ok := governanceLabels(a); !ok || typ != "propagated" || policy != "p" || policyNS != "ns" || clusterNS != "c1" {
		t.Errorf("policy_governance_info labels %q %q %q %q %v", typ, policy, policyNS, clusterNS, ok)
	}
	// What the transform is for: one labels map and one annotations map for every replica of a
	// root, whatever its cluster.
	if reflect.ValueOf(a.Labels).UnsafePointer() != reflect.ValueOf(b.Labels).UnsafePointer() ||
		reflect.ValueOf(a.Annotations).UnsafePointer() != reflect.ValueOf(b.Annotations).UnsafePointer() {
		t.Errorf("replicas of one root keep maps of their own")
	}
	if unsafe.StringData(a.Name) != unsafe.StringData(b.Name) || unsafe.StringData(a.GenerateName) != unsafe.StringData(b.GenerateName) {
		t.Errorf("replicas of one root keep copies of its name and spec hash")
	}
	if again := replica("c1"); unsafe.StringData(again.Namespace) != unsafe.StringData(a.Namespace) {
		t.Errorf("replicas in one cluster keep copies of its namespace")
	}
}

func TestTrimPolicy_LeavesARootsMetadataItsOwn(t *testing.T) {
	root := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"team": "a"}}}
	labels := root.Labels
	if _, err := trimPolicy(root); err != nil {
		t.Fatal(err)
	}
	if reflect.ValueOf(root.Labels).UnsafePointer() != reflect.ValueOf(labels).UnsafePointer() {
		t.Errorf("a root's labels were replaced: the hub writes its root back")
	}
}

// A root's status has a line per cluster: the cache shares its strings and equal times, and
// changes none of its contents (the hub patches the status from a copy of it).
func TestTrimPolicy_RootStatusSharedNotChanged(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 27, 16, 0, 0, 0, time.UTC))
	root := func(name string) *policyv1.Policy {
		p := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
		for _, cluster := range []string{"c1", "c2"} {
			when := at
			p.Status.Status = append(p.Status.Status, &policyv1.CompliancePerClusterStatus{ClusterName: strings.Clone(cluster),
				ClusterNamespace: strings.Clone(cluster), ComplianceState: policyv1.Compliant, RolloutStatus: policyv1.RolloutSucceeded,
				LastTransitionTime: &when})
		}
		return p
	}
	a, b := root("a"), root("b")
	want := a.Status.DeepCopy()
	for _, p := range []*policyv1.Policy{a, b} {
		if _, err := trimPolicy(p); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(&a.Status, want) {
		t.Errorf("root status changed: %+v, was %+v", a.Status, *want)
	}
	if unsafe.StringData(a.Status.Status[0].ClusterName) != unsafe.StringData(b.Status.Status[0].ClusterNamespace) {
		t.Errorf("roots keep copies of a cluster's name")
	}
	if a.Status.Status[0].LastTransitionTime != a.Status.Status[1].LastTransitionTime {
		t.Errorf("equal transition times of one root not shared")
	}
}

// A relist streams every object again; one the cache holds at the same version must come back as
// the cached object itself (no second copy), anything else through the hub's own transform.
func TestUnchangedObjects_ARelistedObjectIsTheCachedOne(t *testing.T) {
	replica := func(uid types.UID, rv string) *policyv1.Policy {
		return &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "policies.p", Namespace: "cluster1", UID: uid, ResourceVersion: rv,
			Labels: map[string]string{propagator.RootPolicyLabel: "policies.p"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}}}
	}
	var u unchangedObjects
	transformed := 0
	transform := u.transform(func(obj any) (any, error) {
		transformed++
		return trimPolicy(obj)
	})
	// Before the informer is known every object goes through.
	if got, err := transform(replica("u1", "5")); err != nil || got.(*policyv1.Policy).ManagedFields != nil || transformed != 1 {
		t.Fatalf("without a store: %v, %d transforms", err, transformed)
	}
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	u.watch(informerStore{store})
	cached := replica("u1", "5")
	if _, err := trimPolicy(cached); err != nil {
		t.Fatal(err)
	}
	if err := store.Add(cached); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		obj      *policyv1.Policy
		isCached bool
	}{
		{"same version", replica("u1", "5"), true},
		{"the cached object itself", cached, true},
		{"newer version", replica("u1", "6"), false},
		{"recreated under the same name", replica("u2", "5"), false},
		{"no version", replica("u1", ""), false},
	} {
		before := transformed
		got, err := transform(c.obj)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if (got == any(cached)) != c.isCached {
			t.Errorf("%s: cached object returned %v, want %v", c.name, got == any(cached), c.isCached)
		}
		if ran := transformed > before; ran == c.isCached {
			t.Errorf("%s: hub transform ran %v", c.name, ran)
		}
	}
	if cached.ManagedFields != nil || cached.ResourceVersion != "5" {
		t.Errorf("the cached object changed: %+v", cached.ObjectMeta)
	}
}

type informerStore struct{ toolscache.Indexer }

func (f informerStore) GetIndexer() toolscache.Indexer { return f.Indexer }
