package status

import (
	"context"
	"sort"
	"strings"

	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/propagator"
)

// RootPolicyNames lists the root policies of namespace starting with prefix, for shell completion:
// replicas are left out, since they live in cluster namespaces and are not what a user asks about.
func RootPolicyNames(ctx context.Context, c client.Reader, namespace, prefix string) ([]string, error) {
	list := &policyv1.PolicyList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range list.Items {
		if _, replica := p.Labels[propagator.RootPolicyLabel]; !replica && strings.HasPrefix(p.Name, prefix) {
			out = append(out, p.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// ClusterNames lists the managed clusters whose name starts with prefix: those in the policy's
// status first (the ones a user asks "why" about), then every other ManagedCluster.
func ClusterNames(ctx context.Context, c client.Reader, namespace, policy, prefix string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add := func(name string) {
		if !seen[name] && strings.HasPrefix(name, prefix) {
			seen[name] = true
			out = append(out, name)
		}
	}
	root := &policyv1.Policy{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: policy}, root); err == nil {
		for _, l := range root.Status.Status {
			add(l.ClusterName)
		}
	}
	clusters := &clusterv1.ManagedClusterList{}
	if err := c.List(ctx, clusters); err != nil {
		return out, err
	}
	names := make([]string, 0, len(clusters.Items))
	for _, mc := range clusters.Items {
		names = append(names, mc.Name)
	}
	sort.Strings(names)
	for _, n := range names {
		add(n)
	}
	return out, nil
}
