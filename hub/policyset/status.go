package policyset

import (
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"

	policyv1 "regent.dev/regent/api/policy/v1"
	policyv1beta1 "regent.dev/regent/api/policy/v1beta1"
)

// allReporting is OCM's status message when every member reports a compliance.
const allReporting = "All policies are reporting status"

// member is what the set's status needs of one member: nil Policy when it does not exist.
type member struct {
	Name   string
	Policy *policyv1.Policy
}

// computeStatus is the status of set given its members (in spec order) and the clusters its own
// bindings select. It also returns the members that do not exist.
func computeStatus(set *policyv1beta1.PolicySet, members []member, clusters sets.Set[string]) (policyv1beta1.PolicySetStatus, []string) {
	if len(set.Spec.Policies) == 0 {
		// OCM: an empty set has an empty status.
		return policyv1beta1.PolicySetStatus{}, nil
	}
	var reporting, pending, disabled, silent, missing []string
	aggregate := policyv1.Compliant
	placements := map[string]policyv1beta1.PolicySetStatusPlacement{}
	for _, m := range members {
		if m.Policy == nil {
			missing = append(missing, m.Name)
			continue
		}
		for _, p := range m.Policy.Status.Placement {
			if p != nil && p.PolicySet == set.Name {
				placements[p.PlacementBinding] = policyv1beta1.PolicySetStatusPlacement{
					PlacementBinding: p.PlacementBinding, Placement: p.Placement, PlacementRule: p.PlacementRule}
			}
		}
		if m.Policy.Spec.Disabled {
			disabled = append(disabled, m.Name)
			continue
		}
		switch complianceOn(m.Policy, clusters) {
		case "":
			silent = append(silent, m.Name)
		case policyv1.Pending:
			pending = append(pending, m.Name)
			if aggregate != policyv1.NonCompliant {
				aggregate = policyv1.Pending
			}
		case policyv1.NonCompliant:
			reporting = append(reporting, m.Name)
			aggregate = policyv1.NonCompliant
		default:
			reporting = append(reporting, m.Name)
		}
	}
	out := policyv1beta1.PolicySetStatus{StatusMessage: statusMessage(pending, disabled, silent, missing)}
	for _, p := range placements {
		out.Placement = append(out.Placement, p)
	}
	// OCM leaves this in map order; sorted, an unchanged set never looks changed.
	sort.Slice(out.Placement, func(i, j int) bool { return out.Placement[i].PlacementBinding < out.Placement[j].PlacementBinding })
	// As OCM: no compliance while a member has yet to report, nor when none reports at all.
	if len(silent) == 0 && len(reporting)+len(pending) > 0 {
		out.Compliant = aggregate
	}
	return out, missing
}

// complianceOn aggregates a member's per-cluster compliance over the clusters the set selects:
// a cluster that is selected only through another binding of the member does not count for the set.
func complianceOn(p *policyv1.Policy, clusters sets.Set[string]) policyv1.ComplianceState {
	var out policyv1.ComplianceState
	for _, line := range p.Status.Status {
		if line == nil || !clusters.Has(line.ClusterName) {
			continue
		}
		switch line.ComplianceState {
		case policyv1.NonCompliant:
			out = policyv1.NonCompliant
		case policyv1.Pending:
			if out != policyv1.NonCompliant {
				out = policyv1.Pending
			}
		case policyv1.Compliant:
			if out == "" {
				out = policyv1.Compliant
			}
		}
	}
	return out
}

// statusMessage names, in OCM's order and words, the members whose compliance the set lacks.
func statusMessage(pending, disabled, silent, missing []string) string {
	var parts []string
	if len(pending) > 0 {
		parts = append(parts, "Policies awaiting pending dependencies: "+strings.Join(pending, ", "))
	}
	if len(disabled) > 0 {
		parts = append(parts, "Disabled policies: "+strings.Join(disabled, ", "))
	}
	if len(silent) > 0 {
		parts = append(parts, "No status provided while awaiting policy status: "+strings.Join(silent, ", "))
	}
	if len(missing) > 0 {
		parts = append(parts, "Deleted policies: "+strings.Join(missing, ", "))
	}
	if len(parts) == 0 {
		return allReporting
	}
	return strings.Join(parts, "; ")
}
