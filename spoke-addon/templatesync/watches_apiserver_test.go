package templatesync_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/spoke-addon/configpolicy"
	"regent.dev/regent/spoke-addon/templatesync"
)

// watchCounter counts the watches a client holds open at once, by resource: the most at any
// moment. A watch the apiserver ends and the reflector opens again from its last version is still
// one watch of the kind; two informers of one kind hold two at once.
type watchCounter struct {
	mu         sync.Mutex
	open, most map[string]int
	next       http.RoundTripper
}

func (w *watchCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Query().Get("watch") != "true" {
		return w.next.RoundTrip(req)
	}
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	resource := parts[len(parts)-1]
	w.mu.Lock()
	w.open[resource]++
	w.most[resource] = max(w.most[resource], w.open[resource])
	w.mu.Unlock()
	var once sync.Once
	closed := func() {
		once.Do(func() {
			w.mu.Lock()
			w.open[resource]--
			w.mu.Unlock()
		})
	}
	resp, err := w.next.RoundTrip(req)
	if err != nil {
		closed()
		return nil, err
	}
	resp.Body = &watchBody{ReadCloser: resp.Body, closed: closed}
	return resp, nil
}

type watchBody struct {
	io.ReadCloser
	closed func()
}

func (b *watchBody) Close() error {
	defer b.closed()
	return b.ReadCloser.Close()
}

func (w *watchCounter) counts() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for k, v := range w.most {
		out[k] = v
	}
	return out
}

// TestWatches_OneWatchPerKind_SharedWithTheConfigurationPolicyController runs template sync and
// the ConfigurationPolicy controller as the addon assembles them (one manager whose client reads
// unstructured objects through the cache) on policies whose templates are ConfigurationPolicies
// and whose dependencies are Policies. Each kind is watched once, whichever controller reads it:
// template sync reading Policies and ConfigurationPolicies unstructured used to open a second
// watch on each beside the typed ones the controllers are built on, holding every policy twice.
func TestWatches_OneWatchPerKind_SharedWithTheConfigurationPolicyController(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	hub := fleettest.Hub(t)
	watches := &watchCounter{open: map[string]int{}, most: map[string]int{}}
	cfg := rest.CopyConfig(hub.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { watches.next = rt; return watches }
	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
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
	if err := configpolicy.SetupWithManager(mgr, configpolicy.Options{}); err != nil {
		t.Fatal(err)
	}
	fleettest.StartManager(t, mgr)

	c, err := client.New(hub.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, doc := range []string{namespaceYAML("cluster1"), namespaceYAML("apps"), policyYAML("first", ""), policyYAML("second", "first")} {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		for _, name := range []string{"bench.first", "bench.second"} {
			p := &policyv1.Policy{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: "cluster1", Name: name}, p); err != nil {
				return false, err.Error()
			}
			if p.Status.ComplianceState != policyv1.Compliant {
				return false, name + " is " + string(p.Status.ComplianceState)
			}
		}
		return true, ""
	})
	got := watches.counts()
	for _, resource := range []string{"policies", "configurationpolicies", "configmaps", "namespaces"} {
		if got[resource] != 1 {
			t.Errorf("%s: %d watches open at once, want one; all kinds: %v", resource, got[resource], got)
		}
	}
}

func namespaceYAML(name string) string {
	return "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + name + "}"
}

// policyYAML is a replicated policy enforcing one ConfigMap, depending on the Policy dependsOn
// when set.
func policyYAML(name, dependsOn string) string {
	deps := ""
	if dependsOn != "" {
		deps = "  dependencies: [{apiVersion: policy.open-cluster-management.io/v1, kind: Policy, name: " + dependsOn + ", namespace: bench, compliance: Compliant}]\n"
	}
	return `apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata:
  name: bench.` + name + `
  namespace: cluster1
  labels: {policy.open-cluster-management.io/root-policy: bench.` + name + `}
spec:
  disabled: false
  remediationAction: enforce
` + deps + `  policy-templates:
  - objectDefinition:
      apiVersion: policy.open-cluster-management.io/v1
      kind: ConfigurationPolicy
      metadata: {name: ` + name + `}
      spec:
        remediationAction: enforce
        namespaceSelector: {include: [apps]}
        object-templates:
        - complianceType: musthave
          objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: ` + name + `}, data: {a: b}}
`
}
