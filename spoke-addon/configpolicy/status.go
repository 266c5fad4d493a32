package configpolicy

import (
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// buildStatus turns an outcome into the policy's status. Condition transition times carry over
// from old when a template's condition is unchanged, so an unchanged cluster gives a status equal
// to old and statusUnchanged lets the reconciler skip the write.
func buildStatus(old policyv1.ConfigurationPolicyStatus, out policyOutcome, generation int64, now time.Time) policyv1.ConfigurationPolicyStatus {
	st := policyv1.ConfigurationPolicyStatus{
		ComplianceState:         policyv1.Compliant,
		LastEvaluated:           now.UTC().Format(time.RFC3339),
		LastEvaluatedGeneration: generation,
	}
	// The policy created an object only once; later evaluations find it. Keep saying so, as
	// pruning decisions and users depend on it.
	createdBefore := map[string]bool{}
	for _, r := range old.RelatedObjects {
		if r.Properties != nil && r.Properties.UID != "" && r.Properties.CreatedByPolicy != nil && *r.Properties.CreatedByPolicy {
			createdBefore[r.Properties.UID] = true
		}
	}
	for i, t := range out.templates {
		for _, r := range t.related {
			if r.Properties != nil && createdBefore[r.Properties.UID] {
				r.Properties.CreatedByPolicy = ptr(true)
			}
		}
		cond := policyv1.TemplateCondition{
			Type:               "notification",
			Status:             corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now.UTC().Truncate(time.Second)),
			Reason:             "K8s `must have` object already exists",
			Message:            t.message,
		}
		state := policyv1.Compliant
		if !t.compliant {
			state = policyv1.NonCompliant
			st.ComplianceState = policyv1.NonCompliant
			cond.Type, cond.Reason = "violation", "K8s object template is not compliant"
		}
		if i < len(old.CompliancyDetails) && len(old.CompliancyDetails[i].Conditions) == 1 {
			prev := old.CompliancyDetails[i].Conditions[0]
			if prev.Type == cond.Type && prev.Reason == cond.Reason && prev.Message == cond.Message {
				cond.LastTransitionTime = prev.LastTransitionTime
			}
		}
		st.CompliancyDetails = append(st.CompliancyDetails, policyv1.TemplateStatus{
			ComplianceState: state,
			Conditions:      []policyv1.TemplateCondition{cond},
		})
		st.RelatedObjects = append(st.RelatedObjects, t.related...)
	}
	return st
}

// statusUnchanged reports whether writing next would tell a reader anything new; the evaluation
// time alone is not news.
func statusUnchanged(old, next policyv1.ConfigurationPolicyStatus) bool {
	next.LastEvaluated = old.LastEvaluated
	return reflect.DeepEqual(old, next)
}
