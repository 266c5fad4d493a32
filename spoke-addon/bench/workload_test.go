package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// clusterNamespace holds the replicated policies, as spec sync leaves them on a managed cluster.
const clusterNamespace = "cluster1"

// rootNamespace is the hub namespace of the root policies the replicas are named after.
const rootNamespace = "bench"

// workload is the benchmark's cluster: policies policies whose ConfigurationPolicies each hold
// two object templates over perTemplate namespaces, so they cover 2 × perTemplate × policies
// objects. Policy i has kind i%5:
//
//	0 enforce musthave ConfigMap + ServiceAccount: the policy creates them
//	1 inform musthave ConfigMap + mustonlyhave Role, both created by the bench as specified
//	2 inform mustnothave Secret (absent) + musthave ServiceAccount created by the bench
//	3 enforce mustonlyhave ConfigMap the bench created with other data (the policy updates it)
//	  + musthave Role the policy creates
//	4 enforce musthave ConfigMap + ServiceAccount, gated on policy i-1 (kind 3) being Compliant:
//	  through the Policy's dependencies when i%10 == 4, the template's extraDependencies when 9
//
// Namespaces are chosen by namespaceSelector: label group=a or b (alternating policies) or, for
// every third policy, include patterns naming the same namespaces.
type workload struct {
	policies, perTemplate int
}

func (w workload) namespaces() []string {
	out := make([]string, 2*w.perTemplate)
	for i := range out {
		out[i] = fmt.Sprintf("bench-ns-%02d", i)
	}
	return out
}

func (w workload) group(i int) string { return [...]string{"a", "b"}[i%2] }

// objects the policies cover: two templates × perTemplate namespaces each.
func (w workload) objects() int { return w.policies * 2 * w.perTemplate }

func (w workload) policyName(i int) string { return fmt.Sprintf("p-%04d", i) }

// namespacesOf lists the namespaces policy i's selector picks.
func (w workload) namespacesOf(i int) []string {
	g := i % 2
	var out []string
	for n := range w.perTemplate {
		out = append(out, fmt.Sprintf("bench-ns-%02d", g*w.perTemplate+n))
	}
	return out
}

func (w workload) selector(i int) string {
	if i%3 == 0 {
		return fmt.Sprintf("{include: [%s]}", strings.Join(w.namespacesOf(i), ", "))
	}
	return fmt.Sprintf("{matchLabels: {group: %s}}", w.group(i))
}

// templates returns policy i's remediation and its two object templates.
func (w workload) templates(i int) (string, string) {
	n := w.policyName(i)
	cm := func(ctype, data string) string {
		return fmt.Sprintf(`- complianceType: %s
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: %s-cm, labels: {bench: "on"}}, data: %s}`, ctype, n, data)
	}
	sa := fmt.Sprintf(`- complianceType: musthave
  objectDefinition: {apiVersion: v1, kind: ServiceAccount, metadata: {name: %s-sa}}`, n)
	role := func(ctype string) string {
		return fmt.Sprintf(`- complianceType: %s
  objectDefinition: {apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: %s-role}, rules: [{apiGroups: [""], resources: [configmaps], verbs: [get, list]}]}`, ctype, n)
	}
	switch i % 5 {
	case 0:
		return "enforce", cm("musthave", fmt.Sprintf(`{owner: %s}`, n)) + "\n" + sa
	case 1:
		return "inform", cm("musthave", fmt.Sprintf(`{owner: %s}`, n)) + "\n" + role("mustonlyhave")
	case 2:
		return "inform", fmt.Sprintf(`- complianceType: mustnothave
  objectDefinition: {apiVersion: v1, kind: Secret, metadata: {name: %s-secret}}`, n) + "\n" + sa
	case 3:
		return "enforce", cm("mustonlyhave", `{mode: "1"}`) + "\n" + role("musthave")
	default:
		return "enforce", cm("musthave", fmt.Sprintf(`{owner: %s}`, n)) + "\n" + sa
	}
}

// policy is replicated policy i as spec sync writes it into the cluster namespace.
func (w workload) policy(i int) *unstructured.Unstructured {
	n := w.policyName(i)
	remediation, objectTemplates := w.templates(i)
	var deps, extra string
	if i%5 == 4 {
		dep := fmt.Sprintf("[{apiVersion: policy.open-cluster-management.io/v1, kind: Policy, name: %s, namespace: %s, compliance: Compliant}]", w.policyName(i-1), rootNamespace)
		if i%10 == 4 {
			deps = "  dependencies: " + dep + "\n"
		} else {
			extra = "    extraDependencies: " + dep + "\n"
		}
	}
	doc := fmt.Sprintf(`apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata:
  name: %[1]s.%[2]s
  namespace: %[3]s
  labels: {policy.open-cluster-management.io/root-policy: %[1]s.%[2]s, policy.open-cluster-management.io/cluster-name: %[3]s, policy.open-cluster-management.io/cluster-namespace: %[3]s}
spec:
  disabled: false
  remediationAction: %[4]s
%[5]s  policy-templates:
  - objectDefinition:
      apiVersion: policy.open-cluster-management.io/v1
      kind: ConfigurationPolicy
      metadata: {name: %[2]s}
      spec:
        remediationAction: %[4]s
        severity: low
        namespaceSelector: %[6]s
        object-templates:
%[7]s
%[8]s`, rootNamespace, n, clusterNamespace, remediation, deps, w.selector(i), indent(objectTemplates, "        "), extra)
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		panic(fmt.Sprintf("policy %d: %v\n%s", i, err, doc))
	}
	return u
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n"+prefix)
}

// preexisting lists the objects the bench creates before any policy: those kinds 1–3 find.
func (w workload) preexisting(i int) []client.Object {
	n := w.policyName(i)
	var out []client.Object
	for _, ns := range w.namespacesOf(i) {
		switch i % 5 {
		case 1:
			out = append(out, configMap(ns, n+"-cm", map[string]string{"owner": n}), role(ns, n+"-role"))
		case 2:
			out = append(out, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: n + "-sa", Namespace: ns}})
		case 3:
			out = append(out, configMap(ns, n+"-cm", map[string]string{"mode": "0", "extra": "x"}))
		}
	}
	return out
}

func configMap(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"bench": "on"}}, Data: data}
}

func role(ns, name string) client.Object {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"rules":    []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"get", "list"}}},
	}}
	return u
}

// create builds the workload's namespaces and preexisting objects and, when withPolicies, the
// policies, from 16 workers.
func (w workload) create(b *testing.B, ctx context.Context, c client.Client, withPolicies bool) {
	for _, ns := range append(w.namespaces(), clusterNamespace) {
		labels := map[string]string{}
		if strings.HasPrefix(ns, "bench-ns-") {
			var k int
			fmt.Sscanf(ns, "bench-ns-%d", &k)
			labels["group"] = w.group(k / w.perTemplate)
		}
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}); err != nil {
			b.Fatal(err)
		}
	}
	parallel(b, 16, w.policies, func(i int) error {
		for _, o := range w.preexisting(i) {
			if err := c.Create(ctx, o); err != nil {
				return fmt.Errorf("create %s: %w", o.GetName(), err)
			}
		}
		if withPolicies {
			return c.Create(ctx, w.policy(i))
		}
		return nil
	})
}

// unrelated creates n ConfigMaps of size bytes in a namespace no policy selects: objects of a
// watched kind that no template names.
func unrelated(b *testing.B, ctx context.Context, c client.Client, n, size int) {
	if n == 0 {
		return
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "unrelated"}}); err != nil {
		b.Fatal(err)
	}
	payload := strings.Repeat("x", size)
	parallel(b, 16, n, func(i int) error {
		return c.Create(ctx, configMap("unrelated", fmt.Sprintf("u-%05d", i), map[string]string{"payload": payload}))
	})
}

func parallel(b *testing.B, workers, n int, fn func(int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
}
