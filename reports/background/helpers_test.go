package background

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/policyserver"
	"regent.dev/regent/policyserver/registry"
)

var eventually = fleettest.Eventually

// env is one test's policy server: its own name and revisions namespace, a real
// policyserver.Server loaded with the revisions the test publishes, and a scan of them.
type env struct {
	c       client.Client
	ns      string // the revisions' namespace; also the policy server's name
	server  *policyserver.Server
	counted *countingEvaluator
	scanner *Scanner
	module  string
}

// countingEvaluator counts evaluations per server policy name, so a test can tell which policies
// a change re-evaluated.
type countingEvaluator struct {
	next Evaluator
	mu   sync.Mutex
	n    map[string]int
}

func (c *countingEvaluator) Audit(ctx context.Context, policy string, generation int64, request []byte) (*admissionv1.AdmissionResponse, string, error) {
	resp, outcome, err := c.next.Audit(ctx, policy, generation, request)
	if err == nil {
		c.mu.Lock()
		c.n[policy]++
		c.mu.Unlock()
	}
	return resp, outcome, err
}

func (c *countingEvaluator) count(policy string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[policy]
}

func newEnv(t testing.TB) *env {
	t.Helper()
	c, err := client.New(cluster.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := createNamespace(t, c, "ps", nil)
	server, err := policyserver.NewServer(context.Background(), policyserver.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Close(context.Background()) })
	module, err := filepath.Abs(filepath.Join("testdata", "require-label.rego"))
	if err != nil {
		t.Fatal(err)
	}
	return &env{c: c, ns: ns, server: server, counted: &countingEvaluator{next: server, n: map[string]int{}}, module: module}
}

// start runs the scan until the test ends.
func (e *env) start(t testing.TB, interval time.Duration) {
	t.Helper()
	e.startAs(t, cluster.Config, interval)
}

// startAs runs the scan with cfg's identity until the test ends.
func (e *env) startAs(t testing.TB, cfg *rest.Config, interval time.Duration) {
	t.Helper()
	s, err := New(Options{
		Config: cfg, Namespace: e.ns, PolicyServer: e.ns, Interval: interval, Workers: 2,
		Registerer: prometheus.NewRegistry(),
	}, e.counted)
	if err != nil {
		t.Fatal(err)
	}
	e.scanner = s
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("scan: %v", err)
		}
	})
}

func (e *env) evaluations() float64 {
	var n float64
	for _, o := range []string{"accepted", "rejected", "error"} {
		n += testutil.ToFloat64(e.scanner.metrics.evaluations.WithLabelValues(o))
	}
	return n
}

func (e *env) writes(verb string) float64 {
	return testutil.ToFloat64(e.scanner.metrics.writes.WithLabelValues(verb))
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func createNamespace(t testing.TB, c client.Client, prefix string, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: labels}}
	if err := c.Create(ctx(t), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func createConfigMap(t testing.TB, c client.Client, ns, name string, labels map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
	if err := c.Create(ctx(t), cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

// configMapPolicy is a policy on ConfigMaps requiring label, limited to namespaces labelled
// scope=<scope> so that the package's tests, sharing one apiserver, do not see each other's.
func configMapPolicy(label, scope string) kubewardenv1.PolicySpec {
	settings, _ := json.Marshal(map[string]string{"label": label})
	return kubewardenv1.PolicySpec{
		Module: "testdata/require-label.rego", ExecutionMode: "opa", Mode: kubewardenv1.ModeMonitor,
		Settings: &runtime.RawExtension{Raw: settings}, BackgroundAudit: true,
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
		}},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"scope": scope}},
	}
}

// publish makes generation gen of the policy ref the serving one: it is loaded into the server
// and its revision is created, labelled serving, with every other revision of the policy deleted
// (as the controller leaves it once the webhook moved).
func (e *env) publish(t testing.TB, ref kubewardenv1.PolicyReference, gen int64, spec kubewardenv1.PolicySpec) {
	t.Helper()
	e.load(t, ref, gen, spec)
	e.serve(t, ref, gen, spec)
}

// load loads generation gen of ref into the server, as every replica does before the webhook
// (and so the serving label) moves to it.
func (e *env) load(t testing.TB, ref kubewardenv1.PolicyReference, gen int64, spec kubewardenv1.PolicySpec) {
	t.Helper()
	pc := policyserver.PolicyConfig{Module: e.module, ExecutionMode: "opa", Mode: policyserver.ModeMonitor, Settings: spec.Settings.Raw}
	if err := e.server.LoadRevision(ctx(t), registry.Key{Name: ref.ServerPolicyName(), Generation: gen}, pc); err != nil {
		t.Fatal(err)
	}
}

// serve creates the serving revision of a loaded generation.
func (e *env) serve(t testing.TB, ref kubewardenv1.PolicyReference, gen int64, spec kubewardenv1.PolicySpec) {
	t.Helper()
	var data []byte
	var err error
	if kubewardenv1.IsGroupKind(ref.Kind) {
		data, err = json.Marshal(groupOf(spec))
	} else {
		data, err = json.Marshal(spec)
	}
	if err != nil {
		t.Fatal(err)
	}
	rev := &kubewardenv1.PolicyRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: ref.RevisionName(gen), Labels: map[string]string{
			kubewardenv1.PolicyServerLabel: e.ns, kubewardenv1.ServingLabel: "true",
		}},
		Spec: kubewardenv1.PolicyRevisionSpec{ObjectReference: ref, PolicyGeneration: gen, Enabled: true, Data: runtime.RawExtension{Raw: data}},
	}
	if err := e.c.Create(ctx(t), rev); err != nil {
		t.Fatal(err)
	}
	e.unpublish(t, ref, gen)
	spec.PolicyServer = e.ns
	pol := policyObject(ref)
	if err := e.c.Get(ctx(t), client.ObjectKeyFromObject(pol), pol); apierrors.IsNotFound(err) {
		switch p := pol.(type) {
		case *kubewardenv1.ClusterAdmissionPolicy:
			p.Spec.PolicySpec = spec
		case *kubewardenv1.AdmissionPolicy:
			p.Spec = spec
		case *kubewardenv1.ClusterAdmissionPolicyGroup:
			p.Spec = groupOf(spec)
		case *kubewardenv1.AdmissionPolicyGroup:
			p.Spec = groupOf(spec)
		}
		err = e.c.Create(ctx(t), pol)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// policyObject is the policy ref names, as the scan reads it to tell a deleted policy (whose
// results go) from another server's (whose results stay).
func policyObject(ref kubewardenv1.PolicyReference) client.Object {
	meta := metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace}
	switch ref.Kind {
	case kubewardenv1.KindAdmissionPolicy:
		return &kubewardenv1.AdmissionPolicy{ObjectMeta: meta}
	case kubewardenv1.KindAdmissionPolicyGroup:
		return &kubewardenv1.AdmissionPolicyGroup{ObjectMeta: meta}
	case kubewardenv1.KindClusterAdmissionPolicyGroup:
		return &kubewardenv1.ClusterAdmissionPolicyGroup{ObjectMeta: meta}
	}
	return &kubewardenv1.ClusterAdmissionPolicy{ObjectMeta: meta}
}

// groupOf is a group of one member, spec's module, with spec's rules and selectors: the scan
// only reads those, and the server evaluates the group under its own name (the test loads spec's
// module there).
func groupOf(spec kubewardenv1.PolicySpec) kubewardenv1.PolicyGroupSpec {
	return kubewardenv1.PolicyGroupSpec{
		PolicyServer: spec.PolicyServer, Mode: spec.Mode, Expression: "only()", Message: "rejected by the group",
		Policies: map[string]kubewardenv1.PolicyGroupMember{"only": {Module: spec.Module, Settings: spec.Settings}},
		Rules:    spec.Rules, NamespaceSelector: spec.NamespaceSelector, ObjectSelector: spec.ObjectSelector,
		BackgroundAudit: spec.BackgroundAudit,
	}
}

// unpublish deletes the revisions of ref except generation keep; with keep 0, also the policy,
// as when a user deletes it.
func (e *env) unpublish(t testing.TB, ref kubewardenv1.PolicyReference, keep int64) {
	t.Helper()
	if keep == 0 {
		if err := e.c.Delete(ctx(t), policyObject(ref)); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	var list kubewardenv1.PolicyRevisionList
	if err := e.c.List(ctx(t), &list, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		r := &list.Items[i]
		if r.Spec.ObjectReference == ref && r.Spec.PolicyGeneration != keep {
			if err := e.c.Delete(ctx(t), r); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
	}
}

// cluster names a ClusterAdmissionPolicy of this test: its name carries the test's suffix, since
// the package's tests share one apiserver; reports are compared with the suffix cut.
func (e *env) cluster(name string) kubewardenv1.PolicyReference {
	return kubewardenv1.PolicyReference{APIVersion: kubewardenv1.GroupVersion.String(), Kind: kubewardenv1.KindClusterAdmissionPolicy, Name: name + "-" + e.ns}
}

// clusterGroup names a ClusterAdmissionPolicyGroup of this test, as cluster names a policy.
func (e *env) clusterGroup(name string) kubewardenv1.PolicyReference {
	return kubewardenv1.PolicyReference{APIVersion: kubewardenv1.GroupVersion.String(), Kind: kubewardenv1.KindClusterAdmissionPolicyGroup, Name: name + "-" + e.ns}
}

func namespacedGroup(ns, name string) kubewardenv1.PolicyReference {
	return kubewardenv1.PolicyReference{APIVersion: kubewardenv1.GroupVersion.String(), Kind: kubewardenv1.KindAdmissionPolicyGroup, Namespace: ns, Name: name}
}

func namespacedPolicy(ns, name string) kubewardenv1.PolicyReference {
	return kubewardenv1.PolicyReference{APIVersion: kubewardenv1.GroupVersion.String(), Kind: kubewardenv1.KindAdmissionPolicy, Namespace: ns, Name: name}
}

// reportsIn lists ns's ResourceReports as "<configmap>: <policy>=<result>@<version> ..." lines,
// sorted, the form the tests compare.
func reportsIn(t testing.TB, c client.Client, ns, suffix string) []string {
	t.Helper()
	var list reportsv1alpha1.ResourceReportList
	if err := c.List(ctx(t), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range list.Items {
		owner := "?"
		if len(r.OwnerReferences) == 1 && string(r.OwnerReferences[0].UID) == r.Name {
			owner = r.OwnerReferences[0].Name
		}
		var parts []string
		for _, res := range r.Spec.Results {
			key, _ := reportsv1alpha1.PolicyLabelKey(reportsv1alpha1.PolicyScope(res.Properties[reportsv1alpha1.PolicyScopeProperty]), res.Policy)
			parts = append(parts, fmt.Sprintf("%s=%s@%s", strings.TrimSuffix(res.Policy, suffix), res.Result, r.Labels[key]))
		}
		sort.Strings(parts)
		out = append(out, owner+": "+strings.Join(parts, " "))
	}
	sort.Strings(out)
	return out
}

// reportsAre waits until ns's reports are want.
func (e *env) reportsAre(t testing.TB, ns string, want ...string) {
	t.Helper()
	sort.Strings(want)
	eventually(t, time.Minute, func() (bool, string) {
		got := reportsIn(t, e.c, ns, "-"+e.ns)
		return strings.Join(got, "\n") == strings.Join(want, "\n"), fmt.Sprintf("reports of %s:\n%s\nwant:\n%s", ns, strings.Join(got, "\n"), strings.Join(want, "\n"))
	})
}
