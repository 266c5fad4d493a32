package admissionpolicy

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// policyUIDAnnotation on a webhook configuration is the UID of the policy that wrote it, next to
// policyRefAnnotation's kind/namespace/name.
const policyUIDAnnotation = "regent.dev/policy-uid"

// conditionConflict on a policy says an object it needs exists and belongs to another policy.
const conditionConflict = "Conflict"

// conflictRetry is how soon a policy blocked by another's object looks again: the other object
// going away wakes only its own policy.
const conflictRetry = 30 // seconds

// ownershipConflict is an object at a name the policy derives that another policy (or nobody
// the controller knows) owns. The controller never updates or deletes such an object.
type ownershipConflict struct {
	kind, name string
	// owner describes who the object belongs to, for messages.
	owner string
}

func (c *ownershipConflict) Error() string {
	return fmt.Sprintf("%s %s belongs to %s, not to this policy: it is left as it is", c.kind, c.name, c.owner)
}

// condition is what the policy's status says while the conflict lasts.
func (c *ownershipConflict) condition(generation int64) metav1.Condition {
	return metav1.Condition{
		Type: conditionConflict, Status: metav1.ConditionTrue, Reason: "OwnedByAnotherPolicy",
		Message:            c.Error() + ", and this policy's newest generation is not served until it is gone",
		ObservedGeneration: generation,
	}
}

// describeRef names a policy reference for messages; "" is an object no policy wrote.
func describeRef(kind, namespace, name string) string {
	switch {
	case kind == "":
		return "no Regent policy"
	case namespace == "":
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}

// sameRef tells whether a recorded reference names ref's policy. The UID is not compared: two
// policies cannot hold one kind/namespace/name at once, so an object recorded for the same name
// and another UID was left by an earlier policy of that name, which is gone, and is taken over as
// before; distinct names never share an object since ServerPolicyName is injective.
func sameRef(kind, namespace, name string, ref kubewardenv1.PolicyReference) bool {
	return kind == ref.Kind && namespace == ref.Namespace && name == ref.Name
}

// webhookOwner checks the metadata of an existing webhook configuration against ref.
func webhookOwner(existing metav1.Object, kind string, ref kubewardenv1.PolicyReference) *ownershipConflict {
	k, ns, name, ok := parsePolicyRef(existing.GetAnnotations()[policyRefAnnotation])
	if ok && sameRef(k, ns, name, ref) {
		return nil
	}
	return &ownershipConflict{kind: kind, name: existing.GetName(), owner: describeRef(k, ns, name)}
}

// revisionOwner checks an existing PolicyRevision against ref.
func revisionOwner(existing *kubewardenv1.PolicyRevision, ref kubewardenv1.PolicyReference) *ownershipConflict {
	o := existing.Spec.ObjectReference
	if sameRef(o.Kind, o.Namespace, o.Name, ref) {
		return nil
	}
	return &ownershipConflict{kind: "PolicyRevision", name: existing.Namespace + "/" + existing.Name,
		owner: describeRef(o.Kind, o.Namespace, o.Name)}
}

// policyLabelValues are the values of PolicyLabel the policy's revisions can carry: its own, and
// for an AdmissionPolicy whose name changed with the injective naming, the one an earlier version
// wrote (Kubewarden's name). Revisions are the policy's by their objectReference, whatever their
// name, so those keep serving and are collected as usual after an upgrade; under the earlier label
// another tenant's revisions may also be found, and the callers' reference checks skip them.
func policyLabelValues(ref kubewardenv1.PolicyReference) []string {
	values := []string{ref.LabelValue()}
	if ref.Kind != kubewardenv1.KindAdmissionPolicy {
		return values
	}
	earlier := "namespaced-" + ref.Namespace + "-" + ref.Name
	if earlier != values[0] && len(earlier) <= kubewardenv1.MaxLabelValue {
		values = append(values, earlier)
	}
	return values
}
