package lifecycle

import (
	"context"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/reports/background"
)

// The leader runs the background scan with the revisions it serves: an object that existed
// before the policy gets a report once the revision is loaded and serving, evaluated in process.
func TestBackgroundScan_LeaderReportsAnObjectThatExistedBeforeThePolicy(t *testing.T) {
	e := newEnv(t)
	const ps = "scan"
	shared := e.policyServer(t, ps)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "scanned-"}}
	if err := e.client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "existing"}}
	if err := e.client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	e.startReplica(t, Options{PolicyServer: ps, Replica: 0, SharedCache: shared, Version: "v1", Background: &background.Options{}})

	spec := regoSpec(writeFile(t, "p.rego", regoSource(t, "")))
	spec.BackgroundAudit = true
	spec.Rules = []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
	}}
	spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns.Name}}
	rev := e.createRevision(t, ps, "scan-p", 1, spec)
	e.waitRevision(t, rev.Name, "Ready", readyOn(0, ""))
	// The controller labels the revision the webhook calls once every replica serves it.
	fleettest.Edit(t, e.client, rev, func(r *kubewardenv1.PolicyRevision) { r.Labels[kubewardenv1.ServingLabel] = "true" })

	fleettest.Eventually(t, 90*time.Second, func() (bool, string) {
		var rep reportsv1alpha1.ResourceReport
		if err := e.client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: string(cm.UID)}, &rep); err != nil {
			return false, err.Error()
		}
		ok := rep.Labels["cpol.reports.regent.dev/scan-p"] == "1" && len(rep.Spec.Results) == 1 && rep.Spec.Results[0].Result == "pass"
		return ok, "report " + rep.Name + " does not hold scan-p's pass at generation 1"
	})
}
