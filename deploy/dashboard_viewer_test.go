package deploy

import (
	"context"
	"fmt"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/hub/dashboard"
)

// TestDashboardViewer_TheInstalledRoleIsWhatTheDashboardChecks applies deploy/hub's viewer role as
// a user does, binds it to a group as docs/dashboard.md says, and asks the apiserver the question
// the dashboard asks for every request: a member may look, someone outside the group may not.
func TestDashboardViewer_TheInstalledRoleIsWhatTheDashboardChecks(t *testing.T) {
	hub := fleettest.Hub(t)
	newKubectl(t, hub).apply(t, "deploy/hub/dashboard-viewer.yaml", "-f", "hub/dashboard-viewer.yaml")
	kube := kubernetes.NewForConfigOrDie(hub.Config)
	ctx := context.Background()
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "regent-dashboard-viewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "regent-dashboard-viewer"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "platform-team"}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	may := func(user string, groups ...string) bool {
		t.Helper()
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: append(groups, "system:authenticated"),
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: dashboard.AuthPath, Verb: dashboard.AuthVerb},
		}}
		got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.Status.Allowed
	}
	// The apiserver's RBAC authorizer reads roles and bindings from its own informers: a binding
	// just created takes effect a moment later.
	fleettest.Eventually(t, 30*time.Second, func() (bool, string) {
		return may("alice", "platform-team"), fmt.Sprintf("a member of the bound group may not %s %s", dashboard.AuthVerb, dashboard.AuthPath)
	})
	if may("mallory", "developers") {
		t.Errorf("a user outside the bound group may %s %s", dashboard.AuthVerb, dashboard.AuthPath)
	}
}
