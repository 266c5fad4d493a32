package templatesync

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// historyLength is how many compliance transitions a template keeps, newest first.
const historyLength = 10

// withTransition returns details updated with the template's new state and message; the history
// gains an entry only when either changed, so unchanged inputs write nothing. A template that has
// not reported yet has no compliance to record.
func withTransition(prev *policyv1.DetailsPerTemplate, name string, state policyv1.ComplianceState, message, eventName string, now metav1.Time) (*policyv1.DetailsPerTemplate, bool) {
	d := &policyv1.DetailsPerTemplate{TemplateMeta: metav1.ObjectMeta{Name: name}, ComplianceState: state}
	if prev != nil {
		d.History = prev.History
		if prev.ComplianceState == state && len(prev.History) > 0 && prev.History[0].Message == message {
			return d, false
		}
	}
	if state == "" {
		return d, false
	}
	entry := policyv1.ComplianceHistory{LastTimestamp: now, Message: message, EventName: eventName}
	d.History = append([]policyv1.ComplianceHistory{entry}, d.History...)
	if len(d.History) > historyLength {
		d.History = d.History[:historyLength]
	}
	return d, true
}
