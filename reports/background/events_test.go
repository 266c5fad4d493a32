package background

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestScan_KindItMayNotListIsReportedAsAnEventOnThePolicy(t *testing.T) {
	e := newEnv(t)
	user := "scan-" + e.ns
	// Everything the scan reads and writes, but not the ConfigMaps the policy covers.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"policies.kubewarden.io"}, Resources: []string{"policyrevisions", "clusteradmissionpolicies", "admissionpolicies", "clusteradmissionpolicygroups", "admissionpolicygroups"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"reports.regent.dev"}, Resources: []string{"resourcereports", "clusterresourcereports"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := e.c.Create(ctx(t), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.c.Delete(ctx(t), o) })
	}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	e.startAs(t, cfg, 0)
	p := e.cluster("team")
	e.publish(t, p, 1, configMapPolicy("team", e.ns))

	eventually(t, time.Minute, func() (bool, string) {
		var events corev1.EventList
		if err := e.c.List(ctx(t), &events, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			return false, err.Error()
		}
		for _, ev := range events.Items {
			if ev.InvolvedObject.Name == p.Name && ev.InvolvedObject.Kind == "ClusterAdmissionPolicy" && ev.Reason == "BackgroundScanFailed" &&
				ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, "configmaps") && strings.Contains(ev.Message, "forbidden") {
				return true, ""
			}
		}
		return false, "no BackgroundScanFailed event on " + p.Name
	})
}
