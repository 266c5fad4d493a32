package opa

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/open-policy-agent/opa/v1/storage"
)

// testAdmission is the webhook over an engine holding the EU/PCI policy and clusters eu-1 (PCI 3)
// and us-1, with namespace labels from labels.
func testAdmission(t *testing.T, labels func(context.Context, string) (map[string]string, error)) (*Admission, *record.FakeRecorder) {
	t.Helper()
	e := NewEngine()
	if err := e.SetSource("regent-system/eu-pci", map[string]string{"regent-system/eu-pci/p.rego": euPCIPolicy}); err != nil {
		t.Fatal(err)
	}
	for name, region := range map[string]string{"eu-1": "eu", "us-1": "us"} {
		obj := map[string]any{"metadata": map[string]any{"name": name, "labels": map[string]any{"region": region, "pci-level": "3"}}}
		if err := writePath(context.Background(), e.Store(), storage.Path{InventoryRoot, "managedclusters", name}, obj); err != nil {
			t.Fatal(err)
		}
	}
	rec := record.NewFakeRecorder(100)
	return &Admission{evaluator: &evaluator{engine: e, pkg: PackagePath(DefaultAdmissionPackage), namespaceLabels: labels},
		policiesExist: func() bool { return true }, recorder: rec, budget: 2 * time.Second}, rec
}

func request(t *testing.T, op admissionv1.Operation, obj, old *clusterv1beta1.Placement) admission.Request {
	t.Helper()
	raw := func(p *clusterv1beta1.Placement) runtime.RawExtension {
		if p == nil {
			return runtime.RawExtension{}
		}
		p.APIVersion, p.Kind = "cluster.open-cluster-management.io/v1beta1", "Placement"
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Namespace: obj.Namespace, Name: obj.Name,
		Object: raw(obj), OldObject: raw(old)}}
}

func pciLabels(context.Context, string) (map[string]string, error) {
	return map[string]string{"compliance": "pci"}, nil
}

func TestAdmission_TransientErrorsAreRetriedWithinTheBudget(t *testing.T) {
	calls := 0
	a, _ := testAdmission(t, func(ctx context.Context, ns string) (map[string]string, error) {
		if calls++; calls < 3 {
			return nil, transientError{errors.New("namespace not in the cache yet")}
		}
		return pciLabels(ctx, ns)
	})
	resp := a.Handle(context.Background(), request(t, admissionv1.Create, newPlacement("payments", "pl"), nil))
	if !resp.Allowed || len(resp.Patches) == 0 || calls != 3 {
		t.Errorf("allowed=%v patches=%d after %d calls; want the third call's answer applied", resp.Allowed, len(resp.Patches), calls)
	}
}

func TestAdmission_FailsClosedWhenTransientErrorsOutlastTheBudget(t *testing.T) {
	a, rec := testAdmission(t, func(context.Context, string) (map[string]string, error) {
		return nil, transientError{errors.New("apiserver unavailable")}
	})
	a.budget = 300 * time.Millisecond
	resp := a.Handle(context.Background(), request(t, admissionv1.Create, newPlacement("payments", "pl"), nil))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "apiserver unavailable") {
		t.Errorf("allowed=%v %q, want a fail-closed denial naming the error", resp.Allowed, resp.Result.Message)
	}
	if ev := <-rec.Events; !strings.Contains(ev, ReasonEvalFailed) {
		t.Errorf("event %q, want %s", ev, ReasonEvalFailed)
	}

	a.policiesExist = func() bool { return false }
	resp = a.Handle(context.Background(), request(t, admissionv1.Create, newPlacement("payments", "pl"), nil))
	if !resp.Allowed || len(resp.Warnings) == 0 {
		t.Errorf("no policy exists: allowed=%v warnings=%v, want admitted with a warning", resp.Allowed, resp.Warnings)
	}
	if ev := <-rec.Events; !strings.Contains(ev, ReasonFailedOpen) {
		t.Errorf("event %q, want %s", ev, ReasonFailedOpen)
	}
}

// An update that does not change what the author asks for is admitted even when the policy
// reports errors (it could not become compliant by being refused); one that asks for something
// new is denied.
func TestAdmission_UpdateDeniedOnlyWhenTheAuthorsRequestChanges(t *testing.T) {
	a, rec := testAdmission(t, pciLabels)
	toUS := newPlacement("payments", "pl", regionPredicate("us"))
	relabelled := toUS.DeepCopy()
	relabelled.Labels = map[string]string{"team": "x"}
	resp := a.Handle(context.Background(), request(t, admissionv1.Update, relabelled, toUS))
	if !resp.Allowed || len(resp.Warnings) == 0 || len(resp.Patches) == 0 {
		t.Errorf("label edit: allowed=%v warnings=%v patches=%d, want admitted, warned and narrowed", resp.Allowed, resp.Warnings, len(resp.Patches))
	}
	if ev := <-rec.Events; !strings.Contains(ev, ReasonNonCompliant) {
		t.Errorf("event %q, want %s", ev, ReasonNonCompliant)
	}

	resp = a.Handle(context.Background(), request(t, admissionv1.Update, toUS, newPlacement("payments", "pl", regionPredicate("eu"))))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "asks for region us") {
		t.Errorf("asking for the US: allowed=%v %q, want denied with the policy's message", resp.Allowed, resp.Result.Message)
	}
}
