package admissionpolicy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
)

// Names of a policy server's identity: its ServiceAccount, Role and RoleBinding in the
// controller namespace share serverObjectName; the cluster-wide read access of its
// context-aware policies is a ClusterRole and ClusterRoleBinding of its own.
func serviceAccountName(ps string) string { return serverObjectName(ps) }
func contextRoleName(ps string) string    { return serverObjectName(ps) + "-context" }

// The leader's identity: a ServiceAccount, Role and RoleBinding of their own, the only one that
// may read the signing key (signing.KeySecretName), and a ClusterRole and ClusterRoleBinding of
// the same name for what the leader workload reads and writes cluster-wide. Replicas verify with
// the certificates alone.
func leaderIdentityName(ps string) string   { return serverObjectName(ps) + "-leader" }
func signingKeySecretName(ps string) string { return signingSecretName(ps) + "-key" }

// leaderAddressLeaseName is the Lease the leader workload publishes its address on while it
// leads (lifecycle.LeaderAddressLeaseName); it does not parse as a replica's.
func leaderAddressLeaseName(ps string) string { return replicaLeasePrefix(ps) + "leader" }

// revisionRules are what every process of a policy server does with its revisions and the
// certificates: its informers list and watch the revisions and the signing Secret of
// certificates (by a metadata.name field selector, which RBAC matches against resourceNames),
// and it writes revision status after a fresh get (the leader Initialized, a replica Ready).
func revisionRules(ps string) []rbacv1.PolicyRule {
	group := kubewardenv1.GroupVersion.Group
	return []rbacv1.PolicyRule{
		{APIGroups: []string{group}, Resources: []string{"policyrevisions"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{group}, Resources: []string{"policyrevisions/status"}, Verbs: []string{"update"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{signingSecretName(ps)}, Verbs: []string{"get", "list", "watch"}},
	}
}

// leaderRules are the calls of the leader workload (`policy-server --role=leader`) in the
// controller namespace, read off policyserver/lifecycle: revisionRules, reading the signing key
// by name, leader election (get, create, update the leader Lease) and, while it leads, the Lease
// it publishes its address on. Lease creation cannot be limited by resourceNames (the name is
// not known to the authorizer before the object exists), so it is the one unnamed write.
func leaderRules(ps string) []rbacv1.PolicyRule {
	return append(revisionRules(ps),
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{signingKeySecretName(ps)}, Verbs: []string{"get"}},
		rbacv1.PolicyRule{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"},
			ResourceNames: []string{serverObjectName(ps), leaderAddressLeaseName(ps)}, Verbs: []string{"get", "update"}},
	)
}

// serviceAccountOf is what the replicas run as: the user's ServiceAccount when the PolicyServer
// names one, the one the controller creates otherwise.
func serviceAccountOf(ps *kubewardenv1.PolicyServer) string {
	if ps.Spec.ServiceAccountName != "" {
		return ps.Spec.ServiceAccountName
	}
	return serviceAccountName(ps.Name)
}

// replicaLeaseNames are the replica Leases of ps the Role must name: one per replica the
// StatefulSet runs, and any that still exists — a replica removed by a scale-down deletes its
// own Lease as it stops, which it may do only while the Role still names it.
func replicaLeaseNames(ps string, replicas int32, existing []string) []string {
	prefix := replicaLeasePrefix(ps)
	numbers := map[int64]bool{}
	for n := range int64(replicas) {
		numbers[n] = true
	}
	for _, name := range existing {
		s, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		// The exact decimal form only: "a-replica-1-replica-0" is a Lease of policy server
		// "a-replica-1", not of "a".
		if n, err := strconv.ParseInt(s, 10, 32); err == nil && n >= 0 && strconv.FormatInt(n, 10) == s {
			numbers[n] = true
		}
	}
	sorted := make([]int64, 0, len(numbers))
	for n := range numbers {
		sorted = append(sorted, n)
	}
	slices.Sort(sorted)
	names := make([]string, len(sorted))
	for i, n := range sorted {
		names[i] = prefix + strconv.FormatInt(n, 10)
	}
	return names
}

// replicaRules are the calls a replica of ps (`policy-server --role=replica`) makes in the
// controller namespace, read off policyserver/lifecycle: revisionRules; each replica gets,
// creates, updates and, when it stops, deletes its own Lease; and it gets the leader Lease and
// the Lease the leader publishes its address on, to find where to fetch signed entries. It never
// campaigns, so it may not write the leader's Leases, nor read the signing key.
func replicaRules(ps string, replicaLeases []string) []rbacv1.PolicyRule {
	rules := append(revisionRules(ps),
		rbacv1.PolicyRule{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"},
			ResourceNames: []string{serverObjectName(ps), leaderAddressLeaseName(ps)}, Verbs: []string{"get"}},
	)
	// No replica Lease to name means no rule at all: an empty resourceNames would allow every
	// Lease in the namespace.
	if len(replicaLeases) > 0 {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"},
			ResourceNames: slices.Clone(replicaLeases), Verbs: []string{"get", "update", "delete"}})
	}
	return rules
}

// contextRules are the cluster-wide calls of the policy server's host capabilities: can_i
// creates SubjectAccessReviews for any policy (as in Kubewarden, it reads nothing), and
// get_resource and the list operations read the resources its context-aware policies name; the
// admission reports are written cluster-wide too (admissionReportRule), classified by the
// policies' annotations (policyReadRule). One
// rule per API group, sorted, so the same inputs give byte-identical rules and no write.
func contextRules(resources []schema.GroupResource) []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{{APIGroups: []string{authorizationv1.GroupName}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}}}
	rules = append(rules, admissionReportRule, policyReadRule)
	byGroup := map[string][]string{}
	for _, gr := range resources {
		if !slices.Contains(byGroup[gr.Group], gr.Resource) {
			byGroup[gr.Group] = append(byGroup[gr.Group], gr.Resource)
		}
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	for _, g := range groups {
		res := byGroup[g]
		slices.Sort(res)
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: res, Verbs: []string{"get", "list", "watch"}})
	}
	return rules
}

// backgroundScanRules are the cluster-wide calls of the background scan (package
// reports/background), which the leader workload runs (its ClusterRole, not the replicas'): it lists and watches the kinds that the rules of
// the server's policies with backgroundAudit name (only list and watch: it reads objects from
// its informers, never one by one, so a get is still refused where no context-aware policy
// needs one), the namespaces' labels and the policies, writes the per-resource reports, and
// records an event on a policy whose scan fails. Kubewarden's audit scanner reads every kind
// instead. One rule per API group, sorted, so the same policies give byte-identical rules.
func backgroundScanRules(scanned []kubewardenv1.PolicySpec) []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{kubewardenv1.GroupVersion.Group}, Resources: []string{"admissionpolicies", "admissionpolicygroups", "clusteradmissionpolicies", "clusteradmissionpolicygroups"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{reportsv1alpha1.GroupVersion.Group}, Resources: []string{"clusterresourcereports", "resourcereports"},
			Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
	var scannedRules []admissionregistrationv1.RuleWithOperations
	for _, spec := range scanned {
		scannedRules = append(scannedRules, spec.Rules...)
	}
	if slices.ContainsFunc(scanned, func(s kubewardenv1.PolicySpec) bool { return s.NamespaceSelector != nil }) {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list", "watch"}})
	}
	byGroup := map[string][]string{}
	for _, r := range scannedRules {
		if !slices.Contains(r.Operations, admissionregistrationv1.Create) && !slices.Contains(r.Operations, admissionregistrationv1.OperationAll) {
			continue // the scan simulates creations only
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if res == "*/*" {
					res = "*"
				} else if strings.Contains(res, "/") {
					continue // subresources are not scanned
				}
				if !slices.Contains(byGroup[g], res) {
					byGroup[g] = append(byGroup[g], res)
				}
			}
		}
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	for _, g := range groups {
		res := byGroup[g]
		slices.Sort(res)
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: res, Verbs: []string{"list", "watch"}})
	}
	return rules
}

// admissionReportRule lets the policy server write the per-resource reports of admission answers
// (package reports/admission): reports.Apply reads the report and creates or updates it; the
// garbage collector, not the policy server, deletes it.
var admissionReportRule = rbacv1.PolicyRule{APIGroups: []string{reportsv1alpha1.GroupVersion.Group},
	Resources: []string{"resourcereports", "clusterresourcereports"}, Verbs: []string{"get", "create", "update"}}

// policyReadRule lets the policy server read the policies' annotations (metadata informers), whose
// severity and category classify the results of admission reports.
var policyReadRule = rbacv1.PolicyRule{APIGroups: []string{kubewardenv1.GroupVersion.Group},
	Resources: []string{"admissionpolicies", "admissionpolicygroups", "clusteradmissionpolicies", "clusteradmissionpolicygroups"}, Verbs: []string{"list", "watch"}}

// wantedResource is a kind a policy lists in its contextAwareResources.
type wantedResource struct {
	policy string
	kubewardenv1.ContextAwareResource
}

// resolveResources maps the kinds the policies want to the resources RBAC names, once each and
// sorted. A kind the mapper does not know (a typo, or a CRD not installed yet) is returned as a
// message naming its policy and left out; the others are granted regardless.
func resolveResources(mapper meta.RESTMapper, wants []wantedResource) ([]schema.GroupResource, []string) {
	var resources []schema.GroupResource
	var unknown []string
	for _, w := range wants {
		gv, err := schema.ParseGroupVersion(w.APIVersion)
		if err == nil {
			var m *meta.RESTMapping
			if m, err = mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: w.Kind}, gv.Version); err == nil {
				if gr := m.Resource.GroupResource(); !slices.Contains(resources, gr) {
					resources = append(resources, gr)
				}
				continue
			}
		}
		msg := fmt.Sprintf("ClusterAdmissionPolicy %s: %s %s: %v", w.policy, w.APIVersion, w.Kind, err)
		if !slices.Contains(unknown, msg) {
			unknown = append(unknown, msg)
		}
	}
	slices.SortFunc(resources, func(a, b schema.GroupResource) int { return strings.Compare(a.String(), b.String()) })
	slices.Sort(unknown)
	return resources, unknown
}
