package v1

import "fmt"

// Kinds a PolicyReference can name.
const (
	KindClusterAdmissionPolicy = "ClusterAdmissionPolicy"
	KindAdmissionPolicy        = "AdmissionPolicy"
)

// ServerPolicyName is the policy's name in the policy server's URL path
// (`/validate/<name>/<generation>`) and the prefix of its revisions' names. The controller and the
// policy server both derive it from here so they can never disagree: a cluster-wide policy is
// `clusterwide-<name>`, a namespaced one `namespaced-<namespace>-<name>`, as in Kubewarden.
func (r PolicyReference) ServerPolicyName() string {
	if r.Kind == KindAdmissionPolicy {
		return "namespaced-" + r.Namespace + "-" + r.Name
	}
	return "clusterwide-" + r.Name
}

// RevisionName is the name of the PolicyRevision holding generation of the referenced policy.
func (r PolicyReference) RevisionName(generation int64) string {
	return fmt.Sprintf("%s-g%d", r.ServerPolicyName(), generation)
}
