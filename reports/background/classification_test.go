package background

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/reports"
)

// TestScan_SeverityAndCategoryAnnotationsClassifyTheResultsAndAChangeRedoesThem: Kubewarden's
// io.kubewarden.policy.severity and .category annotations reach every result of the policy, as
// its audit scanner puts them; changing them (no new generation) makes the reports stale and the
// scan rewrites them; a severity openreports does not know is left out with a Warning Event on
// the policy; removing the annotations leaves the generation alone as the version.
func TestScan_SeverityAndCategoryAnnotationsClassifyTheResultsAndAChangeRedoesThem(t *testing.T) {
	e := newEnv(t)
	ns := createNamespace(t, e.c, "app", map[string]string{"scope": e.ns})
	createConfigMap(t, e.c, ns, "bad", nil)
	createConfigMap(t, e.c, ns, "good", map[string]string{"team": "a"})
	ref := e.cluster("require-team")
	spec := configMapPolicy("team", e.ns)
	spec.Mode = kubewardenv1.ModeProtect
	pol := &kubewardenv1.ClusterAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Annotations: map[string]string{
		kubewardenv1.AnnotationSeverity: "high", kubewardenv1.AnnotationCategory: "Resource validation"}},
		Spec: kubewardenv1.ClusterAdmissionPolicySpec{PolicySpec: spec}}
	pol.Spec.PolicyServer = e.ns
	if err := e.c.Create(ctx(t), pol); err != nil {
		t.Fatal(err)
	}
	e.start(t, 0)
	e.publish(t, ref, 1, spec)

	classified := func(c reports.Classification) {
		t.Helper()
		v := reports.Version("1", pol.Annotations)
		e.reportsAre(t, ns, "bad: require-team=fail@"+v, "good: require-team=pass@"+v)
		var list reportsv1alpha1.ResourceReportList
		if err := e.c.List(ctx(t), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, r := range list.Items {
			for _, res := range r.Spec.Results {
				if res.Severity != c.Severity || res.Category != c.Category {
					t.Errorf("report %s: result severity %q category %q, want %q %q", r.Name, res.Severity, res.Category, c.Severity, c.Category)
				}
			}
		}
	}
	setAnnotations := func(a map[string]string) {
		t.Helper()
		eventually(t, time.Minute, func() (bool, string) {
			if err := e.c.Get(ctx(t), client.ObjectKeyFromObject(pol), pol); err != nil {
				return false, err.Error()
			}
			pol.Annotations = a
			err := e.c.Update(ctx(t), pol)
			return err == nil, fmt.Sprintf("update annotations: %v", err)
		})
	}

	classified(reports.Classification{Severity: "high", Category: "Resource validation"})

	setAnnotations(map[string]string{kubewardenv1.AnnotationSeverity: "Critical", kubewardenv1.AnnotationCategory: "Resource validation"})
	classified(reports.Classification{Severity: "critical", Category: "Resource validation"})

	setAnnotations(map[string]string{kubewardenv1.AnnotationSeverity: "urgent", kubewardenv1.AnnotationCategory: "Resource validation"})
	classified(reports.Classification{Category: "Resource validation"})
	eventually(t, time.Minute, func() (bool, string) {
		var events corev1.EventList
		if err := e.c.List(ctx(t), &events, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			return false, err.Error()
		}
		for _, ev := range events.Items {
			if ev.InvolvedObject.Name == ref.Name && ev.InvolvedObject.Kind == "ClusterAdmissionPolicy" && ev.Reason == "InvalidSeverity" &&
				ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, `"urgent"`) {
				return true, ""
			}
		}
		return false, "no InvalidSeverity event on " + ref.Name
	})

	setAnnotations(nil)
	classified(reports.Classification{})
}

// TestScan_MonitorModeResultsAreInfo: as in Kubewarden, a monitor-mode policy's results are of
// severity info whatever its annotation says.
func TestScan_MonitorModeResultsAreInfo(t *testing.T) {
	e := newEnv(t)
	ns := createNamespace(t, e.c, "app", map[string]string{"scope": e.ns})
	createConfigMap(t, e.c, ns, "bad", nil)
	ref := e.cluster("watch-team")
	spec := configMapPolicy("team", e.ns) // monitor mode
	pol := &kubewardenv1.ClusterAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Annotations: map[string]string{
		kubewardenv1.AnnotationSeverity: "critical"}}, Spec: kubewardenv1.ClusterAdmissionPolicySpec{PolicySpec: spec}}
	pol.Spec.PolicyServer = e.ns
	if err := e.c.Create(ctx(t), pol); err != nil {
		t.Fatal(err)
	}
	e.start(t, 0)
	e.publish(t, ref, 1, spec)
	e.reportsAre(t, ns, "bad: watch-team=fail@"+reports.Version("1", pol.Annotations))
	var rep reportsv1alpha1.ResourceReportList
	if err := e.c.List(ctx(t), &rep, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(rep.Items) != 1 || len(rep.Items[0].Spec.Results) != 1 || rep.Items[0].Spec.Results[0].Severity != "info" {
		t.Errorf("reports %+v, want one result of severity info", rep.Items)
	}
}
