package background

import (
	"strconv"
	"testing"
	"time"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/reports"
)

func TestScan_ObjectsThatExistedBeforeThePolicyAndLaterOnesGetReports(t *testing.T) {
	e := newEnv(t)
	ns := createNamespace(t, e.c, "app", map[string]string{"scope": e.ns})
	bad := createConfigMap(t, e.c, ns, "bad", nil)
	createConfigMap(t, e.c, ns, "good", map[string]string{"team": "a"})
	e.start(t, 0)
	e.publish(t, e.cluster("require-team"), 1, configMapPolicy("team", e.ns))
	e.reportsAre(t, ns, "bad: require-team=fail@1", "good: require-team=pass@1")

	var rep reportsv1alpha1.ResourceReport
	if err := e.c.Get(ctx(t), client.ObjectKey{Namespace: ns, Name: string(bad.UID)}, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Labels[reportsv1alpha1.LabelSource] != string(reportsv1alpha1.SourceBackground) || rep.Labels[reportsv1alpha1.LabelResourceKind] != "ConfigMap" {
		t.Errorf("labels %v", rep.Labels)
	}
	if r := rep.Spec.Results[0]; r.Description != "ConfigMap bad has no label team" || r.Source != ResultSource {
		t.Errorf("result %+v", r)
	}

	// Created with no admission (as while the webhook failed open): the informer brings it in.
	createConfigMap(t, e.c, ns, "late", nil)
	e.reportsAre(t, ns, "bad: require-team=fail@1", "good: require-team=pass@1", "late: require-team=fail@1")
}

func TestScan_PolicyUpdateRecomputesOnlyItsStaleReports(t *testing.T) {
	e := newEnv(t)
	ns := createNamespace(t, e.c, "app", map[string]string{"scope": e.ns})
	names := []string{"a", "b", "c", "d", "e"}
	for _, n := range names {
		createConfigMap(t, e.c, ns, n, map[string]string{"team": "x"})
	}
	team, owner := e.cluster("team"), e.cluster("owner")
	e.start(t, 0)
	e.publish(t, team, 1, configMapPolicy("team", e.ns))
	e.publish(t, owner, 1, configMapPolicy("owner", e.ns))
	var want []string
	for _, n := range names {
		want = append(want, n+": owner=fail@1 team=pass@1")
	}
	e.reportsAre(t, ns, want...)
	teamBefore, writesBefore := e.counted.count(team.ServerPolicyName()), e.writes("apply")

	// owner now requires "team" too: generation 2, every report stale for owner only.
	e.publish(t, owner, 2, configMapPolicy("team", e.ns))
	want = want[:0]
	for _, n := range names {
		want = append(want, n+": owner=pass@2 team=pass@1")
	}
	e.reportsAre(t, ns, want...)
	if n := e.counted.count(team.ServerPolicyName()) - teamBefore; n != 0 {
		t.Errorf("the unchanged policy was evaluated %d more times; its reports were current", n)
	}
	// The scanner counts a write after the apiserver answered it, so the last report can be
	// seen before its write is counted: wait for the count to reach the reports, then check it
	// went no further.
	deadline := time.Now().Add(10 * time.Second)
	for e.writes("apply")-writesBefore < float64(len(names)) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := e.writes("apply") - writesBefore; n != float64(len(names)) {
		t.Errorf("%v report writes for %d stale reports", n, len(names))
	}
}

func TestScan_PolicyDeletionRemovesItsResultsThenTheEmptyReports(t *testing.T) {
	e := newEnv(t)
	ns := createNamespace(t, e.c, "app", map[string]string{"scope": e.ns})
	createConfigMap(t, e.c, ns, "a", nil)
	createConfigMap(t, e.c, ns, "b", map[string]string{"team": "x"})
	team, owner := e.cluster("team"), e.cluster("owner")
	e.start(t, 0)
	e.publish(t, team, 1, configMapPolicy("team", e.ns))
	e.publish(t, owner, 1, configMapPolicy("owner", e.ns))
	e.reportsAre(t, ns, "a: owner=fail@1 team=fail@1", "b: owner=fail@1 team=pass@1")

	e.unpublish(t, owner, 0)
	e.reportsAre(t, ns, "a: team=fail@1", "b: team=pass@1")
	e.unpublish(t, team, 0)
	e.reportsAre(t, ns)
	if e.writes("delete") != 2 {
		t.Errorf("%v reports deleted, want 2", e.writes("delete"))
	}
}

func TestScan_PolicyWithoutBackgroundAuditGetsNoResults(t *testing.T) {
	e := newEnv(t)
	ns := createNamespace(t, e.c, "app", map[string]string{"scope": e.ns})
	createConfigMap(t, e.c, ns, "a", nil)
	e.start(t, 0)
	off := configMapPolicy("owner", e.ns)
	off.BackgroundAudit = false
	e.publish(t, e.cluster("off"), 1, off)
	// A policy that is scanned, published after: once its results are in, the other one's
	// would have been too.
	e.publish(t, e.cluster("on"), 1, configMapPolicy("team", e.ns))
	e.reportsAre(t, ns, "a: on=fail@1")
	if n := e.counted.count(e.cluster("off").ServerPolicyName()); n != 0 {
		t.Errorf("policy without backgroundAudit evaluated %d times", n)
	}
}

func TestScan_AdmissionPolicyCoversOnlyItsNamespace(t *testing.T) {
	e := newEnv(t)
	mine := createNamespace(t, e.c, "mine", map[string]string{"scope": e.ns})
	other := createNamespace(t, e.c, "other", map[string]string{"scope": e.ns})
	createConfigMap(t, e.c, mine, "a", nil)
	createConfigMap(t, e.c, other, "a", nil)
	e.start(t, 0)
	e.publish(t, namespacedPolicy(mine, "team"), 1, configMapPolicy("team", e.ns))
	e.publish(t, e.cluster("everywhere"), 1, configMapPolicy("team", e.ns))
	e.reportsAre(t, mine, "a: everywhere=fail@1 team=fail@1")
	e.reportsAre(t, other, "a: everywhere=fail@1")
	var rep reportsv1alpha1.ResourceReportList
	if err := e.c.List(ctx(t), &rep, client.InNamespace(mine), client.HasLabels{reportsv1alpha1.NamespacedPolicyLabelPrefix + "team"}); err != nil || len(rep.Items) != 1 {
		t.Errorf("AdmissionPolicy label: %d reports, %v", len(rep.Items), err)
	}
}

func TestScan_NamespaceLabelChangeRequeuesItsObjects(t *testing.T) {
	e := newEnv(t)
	ns := createNamespace(t, e.c, "app", nil)
	createConfigMap(t, e.c, ns, "a", nil)
	e.start(t, 0)
	e.publish(t, e.cluster("team"), 1, configMapPolicy("team", e.ns))
	// Marker: a namespace the policy does cover gets its report, so the scan has run.
	marker := createNamespace(t, e.c, "marker", map[string]string{"scope": e.ns})
	createConfigMap(t, e.c, marker, "m", nil)
	e.reportsAre(t, marker, "m: team=fail@1")
	e.reportsAre(t, ns)

	setLabel := func(v string) {
		fleettest.Edit(t, e.c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, func(n *corev1.Namespace) {
			if v == "" {
				delete(n.Labels, "scope")
			} else {
				n.Labels["scope"] = v
			}
		})
	}
	setLabel(e.ns)
	e.reportsAre(t, ns, "a: team=fail@1")
	setLabel("")
	e.reportsAre(t, ns)
}

// The scan watches objects and namespaces in two streams, so an object's event can come before
// its namespace's: the object is then judged with no namespace labels, and the namespace's own
// event must judge it again. The order is forced here: the namespace is held out of the scan's
// store until the object was judged, then handed over as its informer would hand it.
func TestScan_ObjectJudgedBeforeItsNamespaceArrivedIsJudgedAgainWithIt(t *testing.T) {
	e := newEnv(t)
	e.start(t, 0)
	e.publish(t, e.cluster("team"), 1, configMapPolicy("team", e.ns))
	// Marker: a covered namespace's object gets its report, so the namespaces are watched.
	marker := createNamespace(t, e.c, "marker", map[string]string{"scope": e.ns})
	createConfigMap(t, e.c, marker, "m", nil)
	e.reportsAre(t, marker, "m: team=fail@1")

	late := createNamespace(t, e.c, "late", map[string]string{"scope": e.ns})
	e.scanner.mu.Lock()
	store := e.scanner.namespaces.informer.GetIndexer()
	e.scanner.mu.Unlock()
	var held any
	eventually(t, time.Minute, func() (bool, string) {
		o, ok, _ := store.GetByKey(late)
		held = o
		return ok, "namespace " + late + " in the scan's store"
	})
	if err := store.Delete(held); err != nil {
		t.Fatal(err)
	}
	// A policy that selects no namespace shows when the object was judged.
	local := configMapPolicy("local", e.ns)
	local.NamespaceSelector = nil
	e.publish(t, namespacedPolicy(late, "local"), 1, local)
	createConfigMap(t, e.c, late, "a", nil)
	e.reportsAre(t, late, "a: local=fail@1")

	if err := store.Add(held); err != nil {
		t.Fatal(err)
	}
	e.scanner.namespaceAdded(held, false)
	e.reportsAre(t, late, "a: local=fail@1 team=fail@1")
}

func TestScan_DeletedResourceLosesItsReportThroughGarbageCollection(t *testing.T) {
	e := newEnv(t)
	ns := createNamespace(t, e.c, "app", map[string]string{"scope": e.ns})
	cm := createConfigMap(t, e.c, ns, "a", nil)
	createConfigMap(t, e.c, ns, "b", nil)
	e.start(t, 0)
	e.publish(t, e.cluster("team"), 1, configMapPolicy("team", e.ns))
	e.reportsAre(t, ns, "a: team=fail@1", "b: team=fail@1")
	if err := e.c.Delete(ctx(t), cm); err != nil {
		t.Fatal(err)
	}
	e.reportsAre(t, ns, "b: team=fail@1")
	if e.writes("delete") != 0 {
		t.Errorf("the scan deleted %v reports; the garbage collector should have", e.writes("delete"))
	}
}

func TestScan_PeriodicRescanReevaluatesWithoutWriting(t *testing.T) {
	e := newEnv(t)
	ns := createNamespace(t, e.c, "app", map[string]string{"scope": e.ns})
	createConfigMap(t, e.c, ns, "a", nil)
	createConfigMap(t, e.c, ns, "b", nil)
	e.start(t, 200*time.Millisecond)
	team := e.cluster("team")
	e.publish(t, team, 1, configMapPolicy("team", e.ns))
	e.reportsAre(t, ns, "a: team=fail@1", "b: team=fail@1")
	first := e.counted.count(team.ServerPolicyName())
	eventually(t, time.Minute, func() (bool, string) {
		n := e.counted.count(team.ServerPolicyName())
		return n >= first+4, "evaluations: " + strconv.Itoa(n) + ", want two more rounds after " + strconv.Itoa(first)
	})
	if w := e.writes("apply"); w != 2 {
		t.Errorf("%v writes; unchanged answers must not be written again", w)
	}
}

func TestScan_ContextAwareInputChangeRequeuesThePolicy(t *testing.T) {
	e := newEnv(t)
	ns := createNamespace(t, e.c, "app", map[string]string{"scope": e.ns})
	createConfigMap(t, e.c, ns, "a", nil)
	e.start(t, 0)
	reader := configMapPolicy("team", e.ns)
	reader.ContextAwareResources = []kubewardenv1.ContextAwareResource{{APIVersion: "v1", Kind: "Secret"}}
	p := e.cluster("reader")
	e.publish(t, p, 1, reader)
	e.reportsAre(t, ns, "a: reader=fail@1")
	before := e.counted.count(p.ServerPolicyName())
	if err := e.c.Create(ctx(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "input"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() (bool, string) {
		n := e.counted.count(p.ServerPolicyName())
		return n > before, "no evaluation after its input changed"
	})
}

func TestScan_DeletingAPolicyRemovesWhatAdmissionRecordedForIt_NotOtherProducersResults(t *testing.T) {
	e := newEnv(t)
	ns := createNamespace(t, e.c, "app", map[string]string{"scope": e.ns})
	a := createConfigMap(t, e.c, ns, "a", nil)
	b := createConfigMap(t, e.c, ns, "b", nil)
	// A monitor-mode policy the scan does not evaluate: admission recorded its results.
	adm := e.cluster("adm")
	off := configMapPolicy("team", e.ns)
	off.BackgroundAudit = false
	e.publish(t, adm, 1, off)
	record := func(obj *corev1.ConfigMap, policy, source string) {
		res := reports.Resource{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: obj.Name, UID: obj.UID}
		set := []reports.PolicyResults{{Policy: reports.PolicyRef{Scope: reportsv1alpha1.PolicyScopeCluster, Name: policy}, Version: "1",
			Results: []openreportsv1alpha1.ReportResult{{Source: source, Result: "fail"}}}}
		if _, err := reports.Apply(ctx(t), e.c, res, reportsv1alpha1.SourceAdmission, set, nil); err != nil {
			t.Fatal(err)
		}
	}
	record(a, adm.Name, ResultSource)
	record(b, adm.Name, ResultSource)
	// A ConfigurationPolicy's result on b: no admission policy of that name exists, and the scan
	// must leave it.
	record(b, "config-"+e.ns, "configuration-policy")
	e.start(t, 0)
	e.reportsAre(t, ns, "a: adm=fail@1", "b: adm=fail@1 config=fail@1")

	e.unpublish(t, adm, 0)
	e.reportsAre(t, ns, "b: config=fail@1")
}
