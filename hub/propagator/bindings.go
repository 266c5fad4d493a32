package propagator

import (
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	policyv1 "regent.dev/regent/api/policy/v1"
	policyv1beta1 "regent.dev/regent/api/policy/v1beta1"
)

const placementKind = "Placement"

// selection is what the bindings of one root say: which placements select it and which
// placements' clusters get the binding's remediation override.
type selection struct {
	// Status lists bindings and placements for the root's status, sorted.
	Status []*policyv1.Placement
	// Placements select clusters, in name order; a restricted binding selects none.
	Placements []types.NamespacedName
	// Enforcing are the placements whose bindings override remediation to enforce.
	Enforcing []types.NamespacedName
	// Rules and EnforcingRules are the same for PlacementRules, in name order: their clusters come
	// after those of the Placements.
	Rules, EnforcingRules []types.NamespacedName
	// RuleBindings name the bindings that bind the root through a PlacementRule, sorted.
	RuleBindings []string
}

// selectRoot finds the bindings that bind root, directly or through one of sets, to a Placement
// or to a PlacementRule (deprecated by OCM, still bound by much existing YAML).
func selectRoot(root *policyv1.Policy, bindings []policyv1.PlacementBinding, policySets []policyv1beta1.PolicySet) selection {
	setsOfRoot := sets.New[string]()
	for _, s := range policySets {
		for _, p := range s.Spec.Policies {
			if string(p) == root.Name {
				setsOfRoot.Insert(s.Name)
			}
		}
	}
	var sel selection
	selecting, enforcing := sets.New[string](), sets.New[string]()
	rules, enforcingRules, ruleBindings := sets.New[string](), sets.New[string](), sets.New[string]()
	for _, b := range bindings {
		for _, s := range b.Subjects {
			entry := &policyv1.Placement{PlacementBinding: b.Name}
			switch {
			case s.Kind == "Policy" && s.Name == root.Name:
			case s.Kind == "PolicySet" && setsOfRoot.Has(s.Name):
				entry.PolicySet = s.Name
			default:
				continue
			}
			if b.PlacementRef.Kind == placementKind {
				entry.Placement = b.PlacementRef.Name
				if b.SubFilter != "restricted" {
					selecting.Insert(b.PlacementRef.Name)
				}
				if strings.EqualFold(b.BindingOverrides.RemediationAction, string(policyv1.Enforce)) {
					enforcing.Insert(b.PlacementRef.Name)
				}
			} else {
				entry.PlacementRule = b.PlacementRef.Name
				ruleBindings.Insert(b.Name)
				if b.SubFilter != "restricted" {
					rules.Insert(b.PlacementRef.Name)
				}
				if strings.EqualFold(b.BindingOverrides.RemediationAction, string(policyv1.Enforce)) {
					enforcingRules.Insert(b.PlacementRef.Name)
				}
			}
			sel.Status = append(sel.Status, entry)
		}
	}
	sort.Slice(sel.Status, func(i, j int) bool {
		a, b := sel.Status[i], sel.Status[j]
		if a.PlacementBinding != b.PlacementBinding {
			return a.PlacementBinding < b.PlacementBinding
		}
		return a.PolicySet < b.PolicySet
	})
	for _, name := range sets.List(selecting) {
		sel.Placements = append(sel.Placements, types.NamespacedName{Namespace: root.Namespace, Name: name})
	}
	for _, name := range sets.List(enforcing) {
		sel.Enforcing = append(sel.Enforcing, types.NamespacedName{Namespace: root.Namespace, Name: name})
	}
	for _, name := range sets.List(rules) {
		sel.Rules = append(sel.Rules, types.NamespacedName{Namespace: root.Namespace, Name: name})
	}
	for _, name := range sets.List(enforcingRules) {
		sel.EnforcingRules = append(sel.EnforcingRules, types.NamespacedName{Namespace: root.Namespace, Name: name})
	}
	sel.RuleBindings = sets.List(ruleBindings)
	return sel
}
