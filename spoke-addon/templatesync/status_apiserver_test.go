package templatesync_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/spoke-addon/templatesync"
)

// TestWriteStatus_NothingBeforeATemplateReports: a policy's status is first written when one of
// its templates reports a compliance. Writing the template's name alone, with no compliance,
// told the hub nothing and cost a write per policy on creation. The ConfigurationPolicy's
// controller is played by the test, so the template stays silent until the test answers.
func TestWriteStatus_NothingBeforeATemplateReports(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	hub := fleettest.Hub(t)
	skip := true
	mgr, err := ctrl.NewManager(hub.Config, ctrl.Options{
		Scheme:     scheme.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: &skip, UsePriorityQueue: new(bool)}, // no priority queue: controller-runtime#3538
		Client:     client.Options{Cache: &client.CacheOptions{Unstructured: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&templatesync.Reconciler{Client: mgr.GetClient(), ClusterNamespace: "cluster1",
		Recorder: mgr.GetEventRecorderFor("templatesync")}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	fleettest.StartManager(t, mgr)
	c, err := client.NewWithWatch(hub.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, doc := range []string{namespaceYAML("cluster1"), namespaceYAML("apps")} {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	w, err := c.Watch(ctx, &policyv1.PolicyList{}, client.InNamespace("cluster1"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	p := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(policyYAML("silent", "")), &p.Object); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	// The template exists: template sync has reconciled the policy at least once.
	cp := &policyv1.ConfigurationPolicy{}
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		err := c.Get(ctx, client.ObjectKey{Namespace: "cluster1", Name: "silent"}, cp)
		return err == nil, "the ConfigurationPolicy is created"
	})
	cp.Status.ComplianceState = policyv1.Compliant
	cp.Status.LastEvaluatedGeneration = cp.Generation
	if err := c.Status().Update(ctx, cp); err != nil {
		t.Fatal(err)
	}
	// Every write to the policy before the Compliant one arrives in order on the watch.
	timeout := time.After(time.Minute)
	for {
		select {
		case ev := <-w.ResultChan():
			got, ok := ev.Object.(*policyv1.Policy)
			if !ok || ev.Type != watch.Modified {
				continue
			}
			if got.Status.ComplianceState == policyv1.Compliant {
				return
			}
			if len(got.Status.Details) > 0 {
				t.Fatalf("status written before the template reported: %+v", got.Status)
			}
		case <-timeout:
			t.Fatal("the policy never became Compliant")
		}
	}
}
