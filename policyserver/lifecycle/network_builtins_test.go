package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/policyserver/internal/guests"
)

// TestNetworkBuiltins: a Rego policy that calls http.send is a condition naming the built-in
// unless its ClusterAdmissionPolicy allows network built-ins; an AdmissionPolicy may not.
func TestNetworkBuiltins(t *testing.T) {
	e := newEnv(t)
	var hits atomic.Int64
	secret := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "instance-role-credentials")
	}))
	t.Cleanup(secret.Close)
	root, err := guests.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, "policyserver", "testdata", "rego", "exfiltrate.rego"))
	if err != nil {
		t.Fatal(err)
	}
	spec := regoSpec(writeFile(t, "exfiltrate.rego", src))
	spec.Settings = &runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"url":%q}`, secret.URL))}

	t.Run("AdmissionPolicy_MayNotAllowNetworkBuiltins", func(t *testing.T) {
		ap := spec
		scope := admissionregistrationv1.NamespacedScope
		ap.AllowNetworkBuiltins = true
		ap.Rules = []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}, Scope: &scope},
		}}
		err := e.client.Create(context.Background(), &kubewardenv1.AdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "exfil", Namespace: testNamespace}, Spec: ap})
		if err == nil || !strings.Contains(err.Error(), "allowNetworkBuiltins is only allowed on a ClusterAdmissionPolicy") {
			t.Fatalf("want the CRD to refuse it, got %v", err)
		}
		cpol := &kubewardenv1.ClusterAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "exfil"},
			Spec: kubewardenv1.ClusterAdmissionPolicySpec{PolicySpec: ap}}
		if err := e.client.Create(context.Background(), cpol); err != nil {
			t.Fatalf("a ClusterAdmissionPolicy may: %v", err)
		}
	})

	t.Run("RefusedByDefault_ServedWhenTheClusterAdmissionPolicyAllowsIt", func(t *testing.T) {
		const ps = "network"
		shared := e.policyServer(t, ps)
		r := e.startReplica(t, Options{PolicyServer: ps, Replica: 0, SharedCache: shared, Version: "v1"})

		rev := e.createRevision(t, ps, "exfil", 1, spec)
		rev = e.waitRevision(t, rev.Name, "Initialized=CompileError", initializedWith(metav1.ConditionFalse, ReasonCompileError))
		if c := cond(rev, kubewardenv1.ConditionInitialized); !strings.Contains(c.Message, `"http.send"`) {
			t.Fatalf("the condition must name the built-in: %q", c.Message)
		}
		if n := hits.Load(); n != 0 {
			t.Fatalf("%d requests reached the server from a refused policy", n)
		}
		if code := r.readyz(t); code != http.StatusOK {
			t.Fatalf("/readyz answered %d: a refused policy must not take the replica down", code)
		}

		allowed := spec
		allowed.AllowNetworkBuiltins = true
		rev = e.createRevision(t, ps, "exfil", 2, allowed)
		e.waitRevision(t, rev.Name, "Ready on replica 0", readyOn(0, ReasonLoaded))
		if code, ok := r.review(t, "/validate/clusterwide-exfil/2", "nginx:1.27"); code != http.StatusOK || ok {
			t.Fatalf("got %d allowed=%v, want the policy's denial", code, ok)
		}
		if hits.Load() == 0 {
			t.Fatal("the allowed policy never reached the server")
		}
	})
}

func TestRevision_AllowNetworkBuiltins_OnlyForClusterAdmissionPolicies(t *testing.T) {
	data, _ := json.Marshal(kubewardenv1.PolicySpec{Module: "x.rego", AllowNetworkBuiltins: true})
	for kind, want := range map[string]bool{kubewardenv1.KindClusterAdmissionPolicy: true, kubewardenv1.KindAdmissionPolicy: false} {
		rev, err := decodeRevision(&kubewardenv1.PolicyRevision{Spec: kubewardenv1.PolicyRevisionSpec{
			ObjectReference: kubewardenv1.PolicyReference{Kind: kind, Name: "p", Namespace: "shop"}, PolicyGeneration: 1,
			Data: runtime.RawExtension{Raw: data}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := rev.policyConfig("x.wasm", "", "").AllowNetworkBuiltins; got != want {
			t.Errorf("%s: allowNetworkBuiltins reaches the server as %v, want %v", kind, got, want)
		}
	}
}
