package hub

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/dashboard"
)

// servingDetails keeps, of a replica's compliance details, only what the fleet dashboard shows:
// for each admission-policy template, the generation its policy server serves, as the newest
// history entry says it. One short line per admission policy and cluster instead of up to ten
// full messages per template.
func servingDetails(details []*policyv1.DetailsPerTemplate) []*policyv1.DetailsPerTemplate {
	var kept []*policyv1.DetailsPerTemplate
	for _, d := range details {
		if d == nil || len(d.History) == 0 {
			continue
		}
		a, ok := dashboard.ParseServing(d.History[0].Message)
		if !ok {
			continue
		}
		h := d.History[0]
		h.Message = fmt.Sprintf("%s %s is %s, serving generation %d of %d", a.Kind, a.Name, a.Phase, a.Serving, a.Newest)
		kept = append(kept, &policyv1.DetailsPerTemplate{
			TemplateMeta:    metav1.ObjectMeta{Name: d.TemplateMeta.Name},
			ComplianceState: d.ComplianceState,
			History:         []policyv1.ComplianceHistory{h},
		})
	}
	return kept
}
