package admissionpolicy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
)

// TestKubewardenYAML_EveryFieldSurvivesServerSideApply applies Kubewarden policies that set every
// spec field Kubewarden documents with `kubectl apply --server-side`, reads them back and wants
// each field as written: a pruned matchConditions would widen what the policy matches. The
// webhook configuration then carries them to the apiserver, which validates it.
func TestKubewardenYAML_EveryFieldSurvivesServerSideApply(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config)
	ctx := context.Background()
	kubectlBin, err := fleet.Binary(fleet.DefaultBinDir(), "kubectl")
	if err != nil {
		t.Fatal(err)
	}
	kubectl := func(args ...string) []byte {
		t.Helper()
		out, err := exec.Command(kubectlBin, append([]string{"--kubeconfig", hub.Kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	const fixture = "testdata/kubewarden-every-field.yaml"
	liveLeases(t, c, "kwfields", 0)
	kubectl("apply", "--server-side", "--field-manager=kubewarden-user", "-f", fixture)

	raw, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var want map[string]any
		if err := yaml.Unmarshal(doc, &want); err != nil {
			t.Fatal(err)
		}
		meta := want["metadata"].(map[string]any)
		args := []string{"get", strings.ToLower(want["kind"].(string)), meta["name"].(string), "-o", "json"}
		if ns, ok := meta["namespace"].(string); ok {
			args = append(args, "-n", ns)
		}
		var got map[string]any
		if err := json.Unmarshal(kubectl(args...), &got); err != nil {
			t.Fatal(err)
		}
		for _, d := range missing("", want, got) {
			t.Errorf("%s: %s", want["kind"], d)
		}
	}

	// The served generation's webhook carries them.
	p := &kubewardenv1.ClusterAdmissionPolicy{}
	if err := c.Get(ctx, client.ObjectKey{Name: "kw-every-field"}, p); err != nil || p.Generation != 1 {
		t.Fatalf("generation %d (%v): the controller's own writes must not change the spec", p.Generation, err)
	}
	report(t, c, "clusterwide-kw-every-field-g1", append(readyOn(metav1.ConditionTrue, 0), initializedTrue())...)
	waitForPolicy(t, c, "kw-every-field", "serving generation 1", func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
		return p.Status.ServingGeneration == 1
	})
	w := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: webhookName("clusterwide-kw-every-field")}, w); err != nil {
		t.Fatal(err)
	}
	hook := w.Webhooks[0]
	if len(hook.MatchConditions) != 2 || hook.MatchConditions[0].Name != "not-kube-system" ||
		hook.MatchConditions[1].Expression != "has(object.metadata.labels)" {
		t.Errorf("matchConditions = %+v, want the policy's two", hook.MatchConditions)
	}
	if *hook.MatchPolicy != admissionregistrationv1.Exact || *hook.SideEffects != admissionregistrationv1.SideEffectClassNoneOnDryRun ||
		*hook.TimeoutSeconds != 20 || *hook.FailurePolicy != admissionregistrationv1.Ignore {
		t.Errorf("matchPolicy %s, sideEffects %s, timeout %d, failurePolicy %s; want Exact, NoneOnDryRun, 20, Ignore",
			*hook.MatchPolicy, *hook.SideEffects, *hook.TimeoutSeconds, *hook.FailurePolicy)
	}
	exprs := hook.NamespaceSelector.MatchExpressions
	if len(exprs) != 2 || exprs[0].Operator != metav1.LabelSelectorOpNotIn || exprs[0].Values[0] != testNamespace || exprs[1].Key != "environment" {
		t.Errorf("namespaceSelector = %+v, want the controller's namespace excluded and the policy's own expression kept", hook.NamespaceSelector)
	}

	// A matchConditions expression the apiserver cannot compile: no webhook, and the policy
	// says why instead of the controller retrying in silence.
	bad := clusterPolicy("kw-bad-cel", "kwfields")
	bad.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "broken", Expression: "object.metadata.("}}
	if err := c.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	report(t, c, "clusterwide-kw-bad-cel-g1", append(readyOn(metav1.ConditionTrue, 0), initializedTrue())...)
	bad = waitForPolicy(t, c, "kw-bad-cel", "refused", func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
		r := findCondition(p.Status.Conditions, conditionWebhook)
		return r != nil && r.Reason == "WebhookRefused"
	})
	if bad.Status.Phase != kubewardenv1.PhaseFailed || bad.Status.ServingGeneration != 0 || webhookURL(t, c, "clusterwide-kw-bad-cel") != "" ||
		!strings.Contains(findCondition(bad.Status.Conditions, conditionWebhook).Message, "matchConditions") {
		t.Errorf("phase %s, serving %d, conditions %+v: want Failed, nothing served, the apiserver's reason", bad.Status.Phase,
			bad.Status.ServingGeneration, bad.Status.Conditions)
	}

	// The namespaced policy's revision holds what the policy server reads: message and
	// evaluation timeout.
	rev := &kubewardenv1.PolicyRevision{}
	eventually(t, "the AdmissionPolicy's revision", func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: "namespaced-default-kw-every-field-g1"}, rev) == nil
	})
	var data kubewardenv1.PolicySpec
	if err := json.Unmarshal(rev.Spec.Data.Raw, &data); err != nil {
		t.Fatal(err)
	}
	if data.Message != "deployments need an app label" || data.TimeoutEvalSeconds == nil || *data.TimeoutEvalSeconds != 10 || len(data.MatchConditions) != 1 {
		t.Errorf("revision data = %s", rev.Spec.Data.Raw)
	}
}

// missing lists the fields of want that got lacks or holds differently.
func missing(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: got %v, want an object", path, got)}
		}
		var out []string
		for k, v := range w {
			out = append(out, missing(path+"."+k, v, g[k])...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: got %v, want %v", path, got, want)}
		}
		var out []string
		for i := range w {
			out = append(out, missing(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return out
	}
	// Numbers come back as float64 from JSON and YAML alike; false is a bool's zero value, which
	// the API may omit when the field has no default.
	if !reflect.DeepEqual(want, got) && (want != false || got != nil) {
		return []string{fmt.Sprintf("%s: got %v, want %v", path, got, want)}
	}
	return nil
}

// TestKubewardenRules_ImmutablePolicyServerAndNoProtectToMonitor: Kubewarden refuses these
// updates in its webhook; Regent's CRDs refuse them with CEL transition rules, with Kubewarden's
// messages, so the same kubectl apply fails the same way.
func TestKubewardenRules_ImmutablePolicyServerAndNoProtectToMonitor(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config)
	ctx := context.Background()
	monitor, protect := kubewardenv1.ModeMonitor, kubewardenv1.ModeProtect
	some := admissionregistrationv1.SideEffectClassSome
	tests := []struct {
		name   string
		create func(*kubewardenv1.ClusterAdmissionPolicy)
		update func(*kubewardenv1.ClusterAdmissionPolicy)
		refuse string // "" when accepted
	}{
		{name: "PolicyServerChanged", update: func(p *kubewardenv1.ClusterAdmissionPolicy) { p.Spec.PolicyServer = "other" },
			refuse: "the field is immutable"},
		{name: "ProtectToMonitor", update: func(p *kubewardenv1.ClusterAdmissionPolicy) { p.Spec.Mode = monitor },
			refuse: "field cannot transition from protect to monitor. Recreate instead."},
		{name: "MonitorToProtect", create: func(p *kubewardenv1.ClusterAdmissionPolicy) { p.Spec.Mode = monitor },
			update: func(p *kubewardenv1.ClusterAdmissionPolicy) { p.Spec.Mode = protect }},
		{name: "OtherFieldsChange", update: func(p *kubewardenv1.ClusterAdmissionPolicy) {
			p.Spec.Message = "changed"
			p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "a", Expression: "true"}}
		}},
		{name: "EvalTimeoutAboveWebhookTimeout", update: func(p *kubewardenv1.ClusterAdmissionPolicy) {
			p.Spec.TimeoutSeconds, p.Spec.TimeoutEvalSeconds = ptrTo(int32(5)), ptrTo(int32(6))
		}, refuse: "timeoutEvalSeconds cannot be greater than timeoutSeconds"},
		{name: "SideEffectsSome", update: func(p *kubewardenv1.ClusterAdmissionPolicy) { p.Spec.SideEffects = &some },
			refuse: "spec.sideEffects: Unsupported value: \"Some\""},
		{name: "DuplicateMatchConditionNames", update: func(p *kubewardenv1.ClusterAdmissionPolicy) {
			p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "a", Expression: "true"}, {Name: "a", Expression: "false"}}
		}, refuse: "Duplicate value"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := clusterPolicy(fmt.Sprintf("rules-%d", i), "rules")
			if tt.create != nil {
				tt.create(p)
			}
			if err := c.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
			// The controller adds its finalizer meanwhile: retry on conflicts, as kubectl apply does.
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
					return err
				}
				tt.update(p)
				return c.Update(ctx, p)
			})
			switch {
			case tt.refuse == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.refuse != "" && (err == nil || !strings.Contains(err.Error(), tt.refuse)):
				t.Fatalf("got %v, want a refusal saying %q", err, tt.refuse)
			}
		})
	}

	t.Run("AdmissionPolicyMayNotEnterTheControllerNamespace", func(t *testing.T) {
		ap := &kubewardenv1.AdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "inside"},
			Spec: clusterPolicy("inside", "rules").Spec.PolicySpec}
		ap.Spec.AllowInsideAdmissionControllerNamespace = true
		if err := c.Create(ctx, ap); err == nil || !strings.Contains(err.Error(), "allowInsideAdmissionControllerNamespace is only allowed on a ClusterAdmissionPolicy") {
			t.Fatalf("got %v, want a refusal", err)
		}
	})

	// A rollback is an update like any other: restoring a monitor generation under a protect
	// policy is refused, and the Rollback condition says why instead of retrying forever.
	t.Run("RollbackToMonitorGenerationRefused", func(t *testing.T) {
		p := clusterPolicy("rules-rollback", "rules")
		p.Spec.Mode = monitor
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		eventually(t, "revision of generation 1", func() bool {
			return c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: "clusterwide-rules-rollback-g1"}, &kubewardenv1.PolicyRevision{}) == nil
		})
		update(t, c, p, func() { p.Spec.Mode = protect })
		update(t, c, p, func() { p.Annotations = map[string]string{kubewardenv1.RollbackAnnotation: "1"} })
		p = waitForPolicy(t, c, "rules-rollback", "Rollback refused", func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
			r := findCondition(p.Status.Conditions, conditionRollback)
			return r != nil && r.Reason == "RollbackRefused"
		})
		if r := findCondition(p.Status.Conditions, conditionRollback); !strings.Contains(r.Message, "field cannot transition from protect to monitor") {
			t.Errorf("Rollback = %+v, want the apiserver's reason", r)
		}
		if p.Spec.Mode != protect || p.Generation != 2 {
			t.Errorf("mode %s at generation %d, want the policy left in protect at generation 2", p.Spec.Mode, p.Generation)
		}
	})
}
