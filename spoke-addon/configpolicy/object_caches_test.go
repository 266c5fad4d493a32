package configpolicy

import (
	"context"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet/fleettest"
)

// TestObjectCaches_HoldOnlyTheScopesPoliciesName runs the controller against a real apiserver and
// checks what its caches watch as policies come, change and go: a kind only in the namespaces the
// policies name (so the objects of other namespaces are never held), cluster-wide once more
// namespaces than the bound name it, and nothing once no policy names it. Events still come
// through the scoped watches: each step is a change only a watch can bring in.
func TestObjectCaches_HoldOnlyTheScopesPoliciesName(t *testing.T) {
	hub := fleettest.Hub(t)
	var caches *objectCaches
	c, _ := startController(t, hub.Config, Options{MaxNamespacesPerKind: 2, caches: func(o *objectCaches) { caches = o }})
	held := func(what string, want ...string) {
		t.Helper()
		eventually(t, what+": the caches hold "+strings.Join(want, ", "), func() bool { return slices.Equal(caches.held(), want) })
	}
	for _, ns := range []string{"scoped-policies", "scoped-a", "scoped-b", "scoped-c", "wide-1", "wide-2", "wide-3"} {
		namespace(t, c, ns, nil)
	}
	apply(t, c, configMap("scoped-a", "app", "{mode: strict}"))
	apply(t, c, configMap("scoped-b", "unrelated", "{big: value}"))
	held("before any policy")

	one := func(ns string) string {
		return policyYAML("scoped-policies", "one", "inform", `
object-templates:
- complianceType: musthave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: app, namespace: `+ns+`}, data: {mode: strict}}`)
	}
	apply(t, c, one("scoped-a"))
	state(t, c, "scoped-policies", "one", policyv1.Compliant, "configmaps [app] found as specified in namespace scoped-a")
	held("a policy naming a ConfigMap in scoped-a", "ConfigMap in scoped-a")
	// What the cache of scoped-a holds, across every namespace it could: scoped-a's objects only.
	all := configMapList()
	if err := caches.scoped(t, "scoped-a").List(context.Background(), all); err != nil {
		t.Fatal(err)
	}
	for _, cm := range all.Items {
		if cm.GetNamespace() != "scoped-a" {
			t.Errorf("the cache of scoped-a holds ConfigMap %s/%s", cm.GetNamespace(), cm.GetName())
		}
	}
	if len(all.Items) == 0 {
		t.Error("the cache of scoped-a holds nothing")
	}
	apply(t, c, configMap("scoped-a", "app", "{mode: lax}"))
	state(t, c, "scoped-policies", "one", policyv1.NonCompliant, "configmaps [app] found but not as specified in namespace scoped-a")

	apply(t, c, one("scoped-c"))
	state(t, c, "scoped-policies", "one", policyv1.NonCompliant, "configmaps [app] not found in namespace scoped-c")
	held("the policy moved to scoped-c", "ConfigMap in scoped-c")
	apply(t, c, configMap("scoped-c", "app", "{mode: strict}"))
	state(t, c, "scoped-policies", "one", policyv1.Compliant, "configmaps [app] found as specified in namespace scoped-c")

	// Three namespaces through a selector, over the bound of 2: one cluster-wide watch serves them.
	apply(t, c, policyYAML("scoped-policies", "selected", "inform", `
namespaceSelector: {include: ["wide-*"]}
object-templates:
- complianceType: musthave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: app}, data: {mode: strict}}`))
	state(t, c, "scoped-policies", "selected", policyv1.NonCompliant, "configmaps [app] not found in namespace wide-3")
	held("a kind named in 4 namespaces, bound 2", "ConfigMap cluster-wide")
	for _, ns := range []string{"wide-1", "wide-2", "wide-3"} {
		apply(t, c, configMap(ns, "app", "{mode: strict}"))
	}
	state(t, c, "scoped-policies", "selected", policyv1.Compliant)
	apply(t, c, configMap("scoped-c", "app", "{mode: lax}"))
	state(t, c, "scoped-policies", "one", policyv1.NonCompliant, "found but not as specified in namespace scoped-c")

	deletePolicy(t, c, "scoped-policies", "selected")
	held("back to one namespace, half the bound", "ConfigMap in scoped-c")
	deletePolicy(t, c, "scoped-policies", "one")
	held("no policy left")
}

// scoped returns the cache that holds namespace's objects.
func (o *objectCaches) scoped(t *testing.T, namespace string) cache.Cache {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	c, ok := o.caches[namespace]
	if !ok {
		t.Fatalf("no cache holds namespace %q", namespace)
	}
	return c.cache
}

func configMapList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("v1")
	l.SetKind("ConfigMapList")
	return l
}

func deletePolicy(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	p := &policyv1.ConfigurationPolicy{}
	p.Namespace, p.Name = ns, name
	if err := c.Delete(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}
