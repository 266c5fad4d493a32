package v1

import "strings"

// reportGroupPrefix starts the reported name of a policy group. A slash cannot appear in an
// object's name, so no ClusterAdmissionPolicy or AdmissionPolicy is ever reported under a
// group's name (Kubewarden's `clusterwide-group-<name>` is also what its scanner names a
// ClusterAdmissionPolicy called `group-<name>`).
const reportGroupPrefix = "group/"

// ReportedName is the policy name the referenced object's results carry in reports (with the
// report scope saying cluster-wide or namespaced): a policy's own name, `group/<name>` for a group.
func (r PolicyReference) ReportedName() string {
	if IsGroupKind(r.Kind) {
		return reportGroupPrefix + r.Name
	}
	return r.Name
}

// ReportedGroup is the name of the group a reported policy name stands for, ok false when it
// names a policy.
func ReportedGroup(reported string) (name string, ok bool) {
	return strings.CutPrefix(reported, reportGroupPrefix)
}
