package admissionpolicy

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet/fleettest"
)

func ptrString[T ~string](p *T) string {
	if p == nil {
		return "unset"
	}
	return string(*p)
}

// TestAdmissionPolicyScope: an AdmissionPolicy's rules reach namespaced resources only; the
// apiserver never applies a webhook's namespaceSelector to cluster-scoped objects.
func TestAdmissionPolicyScope(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config)
	ctx := context.Background()

	t.Run("AdmissionPolicy_ClusterAndAnyScopeRefusedWithTheReason", func(t *testing.T) {
		createNamespace(t, c, "scopes")
		for _, scope := range []admissionregistrationv1.ScopeType{admissionregistrationv1.ClusterScope, admissionregistrationv1.AllScopes} {
			p := tenantPolicy("scopes", "wide", "scopes")
			p.Spec.Rules[0].Scope = &scope
			err := c.Create(ctx, p)
			if err == nil || !strings.Contains(err.Error(), "an AdmissionPolicy only matches namespaced resources") {
				t.Errorf("scope %s: create = %v, want the CEL rule's refusal", scope, err)
			}
		}
		namespacedScope := admissionregistrationv1.NamespacedScope
		p := tenantPolicy("scopes", "narrow", "scopes")
		p.Spec.Rules[0].Scope = &namespacedScope
		if err := c.Create(ctx, p); err != nil {
			t.Errorf("scope Namespaced refused: %v", err)
		}
		cluster := admissionregistrationv1.ClusterScope
		cp := clusterPolicy("any-scope", "scopes")
		cp.Spec.Rules[0].Scope = &cluster
		if err := c.Create(ctx, cp); err != nil {
			t.Errorf("a ClusterAdmissionPolicy of scope Cluster refused: %v", err)
		}
	})

	t.Run("AdmissionPolicy_WebhookRulesForcedNamespaced", func(t *testing.T) {
		liveLeases(t, c, "scope", 0)
		createNamespace(t, c, "scope")
		p := tenantPolicy("scope", "unset", "scope")
		p.Spec.Rules[0].Resources = []string{"pods", "clusterrolebindings"}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		w := validatingWebhook(t, c, serve(t, c, p))
		// An unset scope is stored as "*" by the apiserver: the webhook would see every
		// cluster-scoped object its resources name, whatever the namespace selector.
		if s := w.Webhooks[0].Rules[0].Scope; s == nil || *s != admissionregistrationv1.NamespacedScope {
			t.Errorf("webhook rule scope = %s, want Namespaced", ptrString(s))
		}
	})

}

// resourceRecorder is a stand-in policy server that admits everything and records the resource
// of every request the apiserver sends it.
type resourceRecorder struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (p *resourceRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	review := &admissionv1.AdmissionReview{}
	if err := json.NewDecoder(r.Body).Decode(review); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	p.seen[review.Request.Resource.Resource] = true
	p.mu.Unlock()
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	_ = json.NewEncoder(w).Encode(review)
}

func (p *resourceRecorder) saw(resource string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[resource]
}

// A tenant's AdmissionPolicy naming clusterrolebindings (scope left out, which the apiserver
// would take as "*") sees its namespace's RoleBindings and never an admin's ClusterRoleBinding.
func TestWebhook_TenantRuleOnClusterRoleBindingsNeverSeesAClusterWrite(t *testing.T) {
	t.Parallel()
	server := &resourceRecorder{seen: map[string]bool{}}
	srv := httptest.NewTLSServer(server)
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config, func(o *Options) {
		o.WebhookURL = func(string) string { return srv.URL }
		o.CABundle = func(context.Context, string) ([]byte, error) { return ca, nil }
	})
	ctx := context.Background()
	liveLeases(t, c, "tenant", 0)
	createNamespace(t, c, "tenant")
	p := tenantPolicy("tenant", "bindings", "tenant")
	fail := admissionregistrationv1.Fail
	p.Spec.FailurePolicy = &fail
	p.Spec.Rules = []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{"rbac.authorization.k8s.io"}, APIVersions: []string{"v1"},
			Resources: []string{"rolebindings", "clusterrolebindings"}},
	}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	serve(t, c, p)
	waitForTenantPolicy(t, c, p, "serving 1", func(q *kubewardenv1.AdmissionPolicy) bool { return q.Status.ServingGeneration == 1 })

	subjects := []rbacv1.Subject{{Kind: "User", Name: "someone", APIGroup: rbacv1.GroupName}}
	role := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}
	n := 0
	// The apiserver picks up webhook configurations asynchronously: once it sends the tenant's
	// own RoleBindings, the webhook is in force.
	eventually(t, "the tenant's webhook sees a RoleBinding in its namespace", func() bool {
		n++
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: fmt.Sprintf("rb-%d", n)}, Subjects: subjects, RoleRef: role}
		_ = c.Create(ctx, rb)
		return server.saw("rolebindings")
	})
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "admins-write"}, Subjects: subjects, RoleRef: role}
	if err := c.Create(ctx, crb); err != nil {
		t.Fatalf("an admin's ClusterRoleBinding: %v", err)
	}
	if server.saw("clusterrolebindings") {
		t.Errorf("the tenant's webhook was sent an admin's ClusterRoleBinding")
	}
}
