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

// ReportedReference is the policy whose results carry the reported name: a group's when the name
// is group/<name>, a policy's otherwise; namespaced (the results' scope) says it is an
// AdmissionPolicy or AdmissionPolicyGroup of namespace, which is always its resources' namespace.
// APIVersion and UID are not known from a report and are left empty.
func ReportedReference(reported string, namespaced bool, namespace string) PolicyReference {
	ref := PolicyReference{Name: reported, Kind: KindClusterAdmissionPolicy}
	if group, ok := ReportedGroup(reported); ok {
		ref.Name, ref.Kind = group, KindClusterAdmissionPolicyGroup
	}
	if namespaced {
		ref.Namespace = namespace
		ref.Kind = map[string]string{KindClusterAdmissionPolicy: KindAdmissionPolicy, KindClusterAdmissionPolicyGroup: KindAdmissionPolicyGroup}[ref.Kind]
	}
	return ref
}
