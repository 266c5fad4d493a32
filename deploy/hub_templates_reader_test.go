package deploy

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"regent.dev/regent/fleet/fleettest"
)

// TestHubTemplatesReader_TheHubMayWatchWhatHubTemplatesRead applies deploy/hub's reader role and
// asks the apiserver whether the hub's ServiceAccount may list and watch what a policy author's
// hub templates read (fromConfigMap, fromSecret, lookup of a custom kind) in any namespace: the
// hub resolves them through watches, and without the grant every hub-templated root fails.
func TestHubTemplatesReader_TheHubMayWatchWhatHubTemplatesRead(t *testing.T) {
	kustomization, err := os.ReadFile("hub/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(kustomization), "- hub-templates-reader.yaml") {
		t.Fatal("deploy/hub/kustomization.yaml does not install hub-templates-reader.yaml")
	}
	hub := fleettest.Hub(t)
	newKubectl(t, hub).apply(t, "deploy/hub/hub-templates-reader.yaml", "-f", "hub/hub-templates-reader.yaml")
	kube := kubernetes.NewForConfigOrDie(hub.Config)
	may := func(user, verb, group, resource string) bool {
		t.Helper()
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "team-a", Verb: verb, Group: group, Resource: resource},
		}}
		got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.Status.Allowed
	}
	const hubSA = "system:serviceaccount:regent-system:regent-hub"
	// The apiserver's RBAC authorizer reads roles and bindings from its own informers: what was
	// just applied takes effect a moment later.
	fleettest.Eventually(t, 30*time.Second, func() (bool, string) {
		return may(hubSA, "create", "authorization.k8s.io", "subjectaccessreviews"), "the applied binding is not in effect yet"
	})
	for _, r := range []struct{ group, resource string }{{"", "configmaps"}, {"", "secrets"}, {"example.com", "widgets"}} {
		for _, verb := range []string{"get", "list", "watch"} {
			if !may(hubSA, verb, r.group, r.resource) {
				t.Errorf("the hub may not %s %s.%s, which hub templates read", verb, r.resource, r.group)
			}
		}
	}
	// hubTemplateOptions.serviceAccountName: the hub asks what the ServiceAccount may read, and
	// never acts as it.
	if !may(hubSA, "create", "authorization.k8s.io", "subjectaccessreviews") {
		t.Error("the hub may not ask whether a hub template's service account may read an object")
	}
	if may(hubSA, "impersonate", "", "serviceaccounts") {
		t.Error("the hub-templates reader lets the hub impersonate service accounts")
	}
	// Read only: the grant writes nothing, and is the hub's alone.
	if may(hubSA, "update", "", "secrets") {
		t.Error("the hub-templates reader grants update of secrets")
	}
	if may("system:serviceaccount:regent-system:someone-else", "list", "", "secrets") {
		t.Error("the hub-templates reader is bound to more than the hub's ServiceAccount")
	}
}
