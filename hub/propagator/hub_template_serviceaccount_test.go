package propagator_test

import (
	"fmt"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet/fleettest"
)

// otherNamespace makes a namespace beside the test's, holding the ConfigMap source.
func (e *env) otherNamespace(data map[string]string) (string, *corev1.ConfigMap) {
	e.t.Helper()
	ns := e.ns + "-other"
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "source", Namespace: ns}, Data: data}
	e.create(cm)
	return ns, cm
}

// grantConfigMapRead lets the ServiceAccount sa of the test's namespace list and watch the
// ConfigMap name in namespace, and nothing else: a Role limited by resourceNames, as OCM's own
// tests grant it. It returns the RoleBinding.
func (e *env) grantConfigMapRead(sa, namespace, name string) *rbacv1.RoleBinding {
	e.t.Helper()
	e.create(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: namespace}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{name}, Verbs: []string{"list", "watch"}}}})
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: namespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: e.ns}}}
	e.create(rb)
	return rb
}

// expectWriteRefused waits for the root's ReplicasWritten condition to name the refusal.
func (e *env) expectWriteRefused(root, want string) {
	e.t.Helper()
	e.eventually("the root names the problem", func() (bool, string) {
		cond := meta.FindStatusCondition(e.root(root).Status.Conditions, "ReplicasWritten")
		if cond == nil {
			return false, "no ReplicasWritten condition"
		}
		return cond.Status == metav1.ConditionFalse && strings.Contains(cond.Message, want), cond.Message
	})
}

func TestHubTemplatesWithServiceAccount_ReadAnotherNamespaceTheServiceAccountMayReadAndFollowIt(t *testing.T) {
	e := newEnv(t)
	c1 := e.cluster("c1", nil)
	other, source := e.otherNamespace(map[string]string{"city": "Raleigh"})
	e.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: e.ns}})
	e.grantConfigMapRead("reader", other, "source")
	e.startHub()
	e.templatedRoot("p", &policyv1.HubTemplateOptions{ServiceAccountName: "reader"}, map[string]string{
		"city": fmt.Sprintf(`{{hub fromConfigMap %q "source" "city" hub}}`, other),
	})
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", c1)
	e.eventually("the value of the other namespace reaches the replica", func() (bool, string) {
		got := replicaData(e.replicas("p")[c1])
		return got["city"] == "Raleigh", fmt.Sprintf("data %v", got)
	})
	// The object read in the other namespace is watched like one of the root's namespace.
	fleettest.Edit(t, e.c, source, func(cm *corev1.ConfigMap) { cm.Data["city"] = "Durham" })
	e.eventually("the new value reaches the replica", func() (bool, string) {
		got := replicaData(e.replicas("p")[c1])
		return got["city"] == "Durham", fmt.Sprintf("data %v", got)
	})
}

func TestHubTemplatesWithServiceAccount_MissingServiceAccountIsNamedOnTheRootUntilItIsCreated(t *testing.T) {
	e := newEnv(t)
	c1 := e.cluster("c1", nil)
	other, _ := e.otherNamespace(map[string]string{"city": "Raleigh"})
	e.grantConfigMapRead("late", other, "source")
	e.startHub()
	e.templatedRoot("p", &policyv1.HubTemplateOptions{ServiceAccountName: "late"}, map[string]string{
		"city": fmt.Sprintf(`{{hub fromConfigMap %q "source" "city" hub}}`, other),
	})
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", c1)
	e.expectWriteRefused("p", fmt.Sprintf("the service account in hubTemplateOptions.serviceAccountName (%s/late) does not exist", e.ns))
	if reps := e.replicas("p"); len(reps) != 0 {
		t.Errorf("a replica was written without the service account: %v", reps)
	}
	// Creating it propagates the root: the ServiceAccount is watched.
	e.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: e.ns}})
	e.eventually("the replica is written once the service account exists", func() (bool, string) {
		got := replicaData(e.replicas("p")[c1])
		return got["city"] == "Raleigh", fmt.Sprintf("data %v", got)
	})
}

func TestHubTemplatesWithServiceAccount_ForbiddenReadIsNamedOnTheRootAndLeavesTheReplica(t *testing.T) {
	e := newEnv(t)
	c1 := e.cluster("c1", nil)
	other, source := e.otherNamespace(map[string]string{"city": "Raleigh", "secret-city": "Atlantis"})
	e.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: e.ns}})
	binding := e.grantConfigMapRead("reader", other, "source")
	e.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hidden", Namespace: other}, Data: map[string]string{"city": "Atlantis"}})
	e.startHub()

	// A ConfigMap the Role does not name is refused, though the hub itself could read it.
	e.templatedRoot("refused", &policyv1.HubTemplateOptions{ServiceAccountName: "reader"}, map[string]string{
		"city": fmt.Sprintf(`{{hub fromConfigMap %q "hidden" "city" hub}}`, other),
	})
	e.bind("b", "pl", policySubject("refused"), policySubject("p"))
	e.decide("pl", 0, "", c1)
	e.expectWriteRefused("refused", fmt.Sprintf(`the service account %s/reader of hubTemplateOptions.serviceAccountName cannot list configmaps hidden in API group "" in the namespace %q`, e.ns, other))
	if reps := e.replicas("refused"); len(reps) != 0 {
		t.Errorf("a replica was written from a forbidden read: %v", replicaData(reps[c1]))
	}

	// A replica written while the read was allowed keeps its value once it no longer is.
	e.templatedRoot("p", &policyv1.HubTemplateOptions{ServiceAccountName: "reader"}, map[string]string{
		"city": fmt.Sprintf(`{{hub fromConfigMap %q "source" "city" hub}}`, other),
	})
	e.eventually("the allowed value reaches the replica", func() (bool, string) {
		got := replicaData(e.replicas("p")[c1])
		return got["city"] == "Raleigh", fmt.Sprintf("data %v", got)
	})
	if err := e.c.Delete(e.ctx, binding); err != nil {
		t.Fatal(err)
	}
	// The apiserver's authorizer learns of the deletion by its own watch: the change comes after.
	e.eventually("the apiserver refuses the service account", func() (bool, string) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + e.ns + ":reader", Groups: []string{"system:serviceaccounts"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: other, Verb: "list", Resource: "configmaps", Name: "source"}}}
		if err := e.c.Create(e.ctx, sar); err != nil {
			return false, err.Error()
		}
		return !sar.Status.Allowed, "still allowed"
	})
	fleettest.Edit(t, e.c, source, func(cm *corev1.ConfigMap) { cm.Data["city"] = "Durham" })
	e.expectWriteRefused("p", "cannot list configmaps source")
	if got := replicaData(e.replicas("p")[c1]); got["city"] != "Raleigh" {
		t.Errorf("the replica took a value its service account may not read: %v", got)
	}
}
