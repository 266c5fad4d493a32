package propagator

import (
	"strings"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// OCM's labels on replicated policies; policy-collection tooling and the spoke rely on them.
const (
	frameworkPrefix     = "policy.open-cluster-management.io/"
	RootPolicyLabel     = frameworkPrefix + "root-policy"
	ClusterNameLabel    = frameworkPrefix + "cluster-name"
	ClusterNSLabel      = frameworkPrefix + "cluster-namespace"
	lastAppliedConfig   = "kubectl.kubernetes.io/last-applied-configuration"
	rolloutCondition    = policyv1.RolloutConditionType
	propagatedCondition = "Propagated"
	overridesCondition  = "BindingOverridesIgnored"
)

// ReplicaName is the name of a root's replica in every cluster namespace: <namespace>.<name>.
func ReplicaName(root *policyv1.Policy) string { return root.Namespace + "." + root.Name }

// rootOf returns the namespace and name of the root a replica belongs to.
func rootOf(replica labeled) (namespace, name string, ok bool) {
	full, found := replica.GetLabels()[RootPolicyLabel]
	if !found {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(full, ".")
	return namespace, name, ok
}

func isReplica(p labeled) bool {
	_, ok := p.GetLabels()[RootPolicyLabel]
	return ok
}

// labeled is a Policy or a CachedReplica.
type labeled interface{ GetLabels() map[string]string }
