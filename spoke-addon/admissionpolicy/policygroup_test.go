package admissionpolicy

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/policyserver/lifecycle"
	"regent.dev/regent/policyserver/selfsigned"
)

// groupSpec is a group on config maps labelled regent-test=<label>, failing closed.
func groupSpec(ps, label, expression string, members map[string]string) kubewardenv1.PolicyGroupSpec {
	fail := admissionregistrationv1.Fail
	spec := kubewardenv1.PolicyGroupSpec{
		PolicyServer: ps, Expression: expression, Message: "the group " + label + " refuses this config map",
		Policies:      map[string]kubewardenv1.PolicyGroupMember{},
		FailurePolicy: &fail, BackgroundAudit: true,
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
		}},
		ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"regent-test": label}},
	}
	for name, module := range members {
		spec.Policies[name] = kubewardenv1.PolicyGroupMember{Module: module, ExecutionMode: "opa"}
	}
	return spec
}

// requireLabel is a Rego policy admitting objects that carry label, and otherwise denying with
// "missing label <label>".
func requireLabel(t testing.TB, label string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "require-"+label+".rego")
	src := fmt.Sprintf(`package policy

default uid := ""

uid := input.request.uid

default allowed := false

allowed if input.request.object.metadata.labels[%[1]q]

main := {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
	"response": {"uid": uid, "allowed": allowed, "status": {"message": "missing label %[1]s"}}}
`, label)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return "file://" + p
}

// The CRDs refuse what Kubewarden's webhook refuses: a group without members, a member name the
// expression cannot call, no expression, no message; and on a namespaced group, members that
// read the cluster.
func TestPolicyGroup_CRDRefusesWhatKubewardenRefuses(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c, err := client.New(hub.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	valid := func() kubewardenv1.PolicyGroupSpec {
		return groupSpec("default", "crd", "a() && !b()", map[string]string{"a": "file:///a.rego", "b": "file:///b.rego"})
	}
	ok := &kubewardenv1.ClusterAdmissionPolicyGroup{ObjectMeta: metav1.ObjectMeta{Name: "valid"}, Spec: valid()}
	if err := c.Create(ctx, ok); err != nil {
		t.Fatalf("a valid group is refused: %v", err)
	}
	for name, tc := range map[string]struct {
		change func(*kubewardenv1.PolicyGroupSpec)
		want   string
	}{
		"no members":        {func(s *kubewardenv1.PolicyGroupSpec) { s.Policies = map[string]kubewardenv1.PolicyGroupMember{} }, "spec.policies"},
		"digit first":       {func(s *kubewardenv1.PolicyGroupSpec) { s.Policies["0a"] = s.Policies["a"] }, "policy group member name is invalid"},
		"special character": {func(s *kubewardenv1.PolicyGroupSpec) { s.Policies["p!ol.ic?y"] = s.Policies["a"] }, "policy group member name is invalid"},
		"reserved word":     {func(s *kubewardenv1.PolicyGroupSpec) { s.Policies["in"] = s.Policies["a"] }, "CEL reserved word"},
		"no expression":     {func(s *kubewardenv1.PolicyGroupSpec) { s.Expression = "" }, "spec.expression"},
		"no message":        {func(s *kubewardenv1.PolicyGroupSpec) { s.Message = "" }, "spec.message"},
		"members read the cluster": {func(s *kubewardenv1.PolicyGroupSpec) {
			m := s.Policies["a"]
			m.ContextAwareResources = []kubewardenv1.ContextAwareResource{{APIVersion: "v1", Kind: "Namespace"}}
			s.Policies["a"] = m
		}, "contextAwareResources"},
	} {
		t.Run(name, func(t *testing.T) {
			spec := valid()
			tc.change(&spec)
			err := c.Create(ctx, &kubewardenv1.ClusterAdmissionPolicyGroup{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: spec})
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want a refusal naming %q, got %v", tc.want, err)
			}
		})
	}
	t.Run("namespaced group with members reading the cluster", func(t *testing.T) {
		spec := valid()
		m := spec.Policies["a"]
		m.ContextAwareResources = []kubewardenv1.ContextAwareResource{{APIVersion: "v1", Kind: "Namespace"}}
		spec.Policies["a"] = m
		err := c.Create(ctx, &kubewardenv1.AdmissionPolicyGroup{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "default"}, Spec: spec})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "a namespaced group may not read cluster resources") {
			t.Fatalf("want a refusal of contextAwareResources, got %v", err)
		}
	})
	t.Run("protect to monitor", func(t *testing.T) {
		ok.Spec.Mode = kubewardenv1.ModeMonitor
		if err := c.Update(ctx, ok); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "cannot transition from protect to monitor") {
			t.Fatalf("want the downgrade refused, got %v", err)
		}
	})
}

// A ClusterAdmissionPolicyGroup goes through the whole lifecycle with a real policy server — the
// leader prepares every member, the replica loads them, the controller moves the webhook and
// says PolicyActive — and the apiserver's requests are judged by the group's expression over its
// members' verdicts.
func TestPolicyGroup_RealApiserverAdmitsByTheGroupsExpression(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	const ps = "groups"
	addr, ca := runGroupServer(t, hub.Config, ps)
	c := startController(t, hub.Config, func(o *Options) {
		o.WebhookURL = func(string) string { return "https://" + addr }
		o.CABundle = func(context.Context, string) ([]byte, error) { return ca, nil }
	})
	ctx := context.Background()
	if err := c.Create(ctx, &kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: ps},
		Spec: kubewardenv1.PolicyServerSpec{Image: "regent:dev", Replicas: 1}}); err != nil {
		t.Fatal(err)
	}
	g := &kubewardenv1.ClusterAdmissionPolicyGroup{ObjectMeta: metav1.ObjectMeta{Name: "team-not-owner"},
		Spec: groupSpec(ps, "group", "team() && !owner()", map[string]string{"team": requireLabel(t, "team"), "owner": requireLabel(t, "owner")})}
	if err := c.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			_ = c.Get(ctx, client.ObjectKeyFromObject(g), g)
			t.Logf("group status: %+v", g.Status)
			var revs kubewardenv1.PolicyRevisionList
			_ = c.List(ctx, &revs, client.InNamespace(testNamespace))
			for _, r := range revs.Items {
				t.Logf("revision %s: conditions %+v replicas %+v", r.Name, r.Status.Conditions, r.Status.Replicas)
			}
		}
	})
	fleettest.Eventually(t, 2*time.Minute, func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(g), g); err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(g.Status.Conditions, kubewardenv1.ConditionPolicyActive)
		return cond != nil && cond.Status == metav1.ConditionTrue && g.Status.PolicyStatus == kubewardenv1.PolicyStatusActive,
			fmt.Sprintf("status %s, conditions %+v", g.Status.PolicyStatus, g.Status.Conditions)
	})
	if url := webhookURL(t, c, "group.clusterwide-team-not-owner"); url != "https://"+addr+"/validate/group.clusterwide-team-not-owner/1" {
		t.Fatalf("webhook calls %q", url)
	}

	n := 0
	create := func(labels map[string]string) error {
		n++
		labels["regent-test"] = "group"
		return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("group-%d", n), Labels: labels}})
	}
	// The apiserver picks webhook configurations up asynchronously: wait for the first denial.
	var denied error
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		denied = create(map[string]string{"team": "a", "owner": "b"})
		return denied != nil, "the config map with an owner was admitted"
	})
	if !strings.Contains(denied.Error(), "the group group refuses this config map") {
		t.Fatalf("team() && !owner() with both labels: want the group's message, got %v", denied)
	}
	if err := create(map[string]string{"team": "a"}); err != nil {
		t.Fatalf("team() && !owner() with a team only must admit: %v", err)
	}
	if err := create(map[string]string{}); err == nil || !strings.Contains(err.Error(), "the group group refuses this config map") {
		t.Fatalf("team() && !owner() without a team must deny with the group's message, got %v", err)
	}
	// An expression calling no member cannot be refused by the CRD (its CEL cannot compile CEL):
	// the leader refuses it, and the group says why.
	bad := &kubewardenv1.ClusterAdmissionPolicyGroup{ObjectMeta: metav1.ObjectMeta{Name: "bad-expression"},
		Spec: groupSpec(ps, "bad", "team() && nope()", map[string]string{"team": requireLabel(t, "team")})}
	if err := c.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(bad), bad); err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(bad.Status.Conditions, kubewardenv1.ConditionInitialized)
		return bad.Status.Phase == kubewardenv1.PhaseFailed && cond != nil && cond.Status == metav1.ConditionFalse &&
				cond.Reason == lifecycle.ReasonInvalidExpression && strings.Contains(cond.Message, "undeclared reference to 'nope'"),
			fmt.Sprintf("phase %s, conditions %+v", bad.Status.Phase, bad.Status.Conditions)
	})
}

// runGroupServer runs a policy server (leader and replica 0 in one process) for ps as cfg, and
// returns its address and the CA its certificate is signed by.
func runGroupServer(t *testing.T, cfg *rest.Config, ps string) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	certs, err := selfsigned.Write(dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts := lifecycle.Options{
		Config: cfg, Role: lifecycle.RoleAll, Namespace: testNamespace, PolicyServer: ps, Replica: 0,
		SignedCache: filepath.Join(dir, "signed"), AdvertiseAddress: ln.Addr().String(),
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
		ResyncInterval: 2 * time.Second, RetryInterval: 2 * time.Second,
	}
	opts.Pull.FileRoots = []string{os.TempDir()}
	opts.Server.Listener = ln
	opts.Server.CertFile, opts.Server.KeyFile = certs.CertFile, certs.KeyFile
	opts.Server.CacheDir = filepath.Join(dir, "private")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lifecycle.Run(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("policy server returned %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("policy server did not stop")
		}
	})
	return ln.Addr().String(), certs.CAPEM
}

// An AdmissionPolicyGroup's webhook sees only its own namespace, whatever its selector says, as an
// AdmissionPolicy's does; its revision holds the whole group, members and expression included.
func TestPolicyGroup_NamespacedGroupsWebhookSeesOnlyItsNamespace(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config)
	ctx := context.Background()
	const ps = "ns-groups"
	liveLeases(t, c, ps, 0)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil {
		t.Fatal(err)
	}
	spec := groupSpec(ps, "ns", "a()", map[string]string{"a": "file:///a.rego"})
	spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "web"}}
	g := &kubewardenv1.AdmissionPolicyGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "only-here"}, Spec: spec}
	if err := c.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	ref := kubewardenv1.PolicyReference{Kind: kubewardenv1.KindAdmissionPolicyGroup, Namespace: "team-a", Name: "only-here"}
	report(t, c, ref.RevisionName(1), append(readyOn(metav1.ConditionTrue, 0), initializedTrue())...)

	rev := &kubewardenv1.PolicyRevision{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: ref.RevisionName(1)}, rev); err != nil {
		t.Fatal(err)
	}
	var held kubewardenv1.PolicyGroupSpec
	if err := json.Unmarshal(rev.Spec.Data.Raw, &held); err != nil || held.Expression != "a()" || held.Policies["a"].Module != "file:///a.rego" {
		t.Fatalf("the revision does not hold the group: %s (%v)", rev.Spec.Data.Raw, err)
	}
	w := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		err := c.Get(ctx, client.ObjectKey{Name: webhookName(ref.ServerPolicyName())}, w)
		return err == nil, fmt.Sprintf("no webhook configuration: %v", err)
	})
	sel := w.Webhooks[0].NamespaceSelector
	if sel == nil || sel.MatchLabels[namespaceNameLabel] != "team-a" || sel.MatchLabels["tier"] != "web" {
		t.Fatalf("the webhook's namespaceSelector %+v does not pin it to team-a (keeping tier=web)", sel)
	}
	if got := *w.Webhooks[0].ClientConfig.URL; !strings.HasSuffix(got, "/validate/group.namespaced.team-a.only-here/1") {
		t.Fatalf("the webhook calls %q", got)
	}
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(g), g); err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(g.Status.Conditions, kubewardenv1.ConditionPolicyActive)
		return cond != nil && cond.Status == metav1.ConditionTrue, fmt.Sprintf("conditions %+v", g.Status.Conditions)
	})
}
