package v1

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Kinds a PolicyReference can name.
const (
	KindClusterAdmissionPolicy = "ClusterAdmissionPolicy"
	KindAdmissionPolicy        = "AdmissionPolicy"
)

// Length limits of what names are derived into.
const (
	// MaxObjectName is the longest name of a PolicyRevision or a webhook configuration (a DNS
	// subdomain).
	MaxObjectName = 253
	// MaxLabelValue is the longest label value.
	MaxLabelValue = 63
)

// ServerPolicyName is the policy's name in the policy server's URL path
// (`/validate/<name>/<generation>`) and what its revisions' and webhook configurations' names and
// labels are derived from. The controller and the policy server both derive it from here so they
// can never disagree. Distinct policies always get distinct names:
//
//   - a ClusterAdmissionPolicy is `clusterwide-<name>`, as in Kubewarden;
//   - an AdmissionPolicy in a namespace without a dash is `namespaced-<namespace>-<name>`, as in
//     Kubewarden;
//   - an AdmissionPolicy in a namespace with a dash is `namespaced.<namespace>.<name>`.
//
// Kubewarden's `namespaced-<namespace>-<name>` alone is ambiguous (namespace `a` with policy
// `b-c` and namespace `a-b` with policy `c` both give `namespaced-a-b-c`), which let one tenant's
// policy overwrite and delete another's webhooks and revisions. The mapping above is injective:
// the three forms start differently (`clusterwide-`, `namespaced-`, `namespaced.`); in the
// second the namespace holds no dash, so the first dash after the prefix ends it; in the third
// the namespace (a DNS label) holds no dot, so the first dot after the prefix ends it; and the
// policy name is the rest. Kubewarden's path is kept wherever that proof allows it.
//
// A group is `group.` and the name its kind without the group would give: no other form starts
// with `group.`, and after it the proof above holds again.
func (r PolicyReference) ServerPolicyName() string {
	switch r.Kind {
	case KindClusterAdmissionPolicyGroup:
		return "group.clusterwide-" + r.Name
	case KindAdmissionPolicyGroup:
		member := r
		member.Kind = KindAdmissionPolicy
		return "group." + member.ServerPolicyName()
	}
	if r.Kind != KindAdmissionPolicy {
		return "clusterwide-" + r.Name
	}
	if strings.Contains(r.Namespace, "-") {
		return "namespaced." + r.Namespace + "." + r.Name
	}
	return "namespaced-" + r.Namespace + "-" + r.Name
}

// RevisionName is the name of the PolicyRevision holding generation of the referenced policy:
// `<server policy name>-g<generation>`, hashed by FitName when too long. It is injective too: a
// generation is digits only, so the last "-g" of the name is the one before it.
func (r PolicyReference) RevisionName(generation int64) string {
	return FitName(fmt.Sprintf("%s-g%d", r.ServerPolicyName(), generation), MaxObjectName)
}

// LabelValue is the server policy name as a label value, hashed by FitName when too long: the
// value of the policy label on its revisions and webhook configurations.
func (r PolicyReference) LabelValue() string {
	return FitName(r.ServerPolicyName(), MaxLabelValue)
}

// hashLength is how many hex digits of sha256 a fitted name keeps: 64 bits.
const hashLength = 16

// FitName returns s when it is shorter than limit and otherwise the first limit-17 bytes of s,
// a dash and 16 hex digits of s's sha256: exactly limit bytes. Fitting keeps names distinct:
// a kept name is shorter than any fitted one, and two fitted names differ unless sha256
// collides. s is a DNS subdomain made of the names above, so the result is one too and a valid
// label value when limit is MaxLabelValue (a dot before the dash becomes a dash: ".-" is not
// allowed).
func FitName(s string, limit int) string {
	if len(s) < limit {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	head := []byte(s[:limit-hashLength-1])
	if head[len(head)-1] == '.' {
		head[len(head)-1] = '-'
	}
	return string(head) + "-" + hex.EncodeToString(sum[:])[:hashLength]
}
