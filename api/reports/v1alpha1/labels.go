package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Labels every per-resource report carries. Values that would not be valid label values (longer
// than 63 characters, e.g. a long API group) are replaced by LabelSafe's hash.
const (
	LabelResourceUID     = "reports.regent.dev/resource-uid"
	LabelResourceGroup   = "reports.regent.dev/resource-group"
	LabelResourceVersion = "reports.regent.dev/resource-version"
	LabelResourceKind    = "reports.regent.dev/resource-kind"
	// LabelSource says which producer wrote the report last: SourceAdmission or SourceBackground.
	LabelSource = "reports.regent.dev/source"
)

// Source is the producer of a report.
type Source string

const (
	SourceAdmission  Source = "admission"
	SourceBackground Source = "background"
)

// PolicyScope says whether a result's policy is namespaced (an AdmissionPolicy, aggregated into
// Report "pol-<name>") or cluster-wide (a ClusterAdmissionPolicy or a ConfigurationPolicy,
// aggregated into "cpol-<name>"). It is kept in every result's properties under
// PolicyScopeProperty and in the prefix of the report's policy label.
type PolicyScope string

const (
	PolicyScopeNamespaced PolicyScope = "namespaced"
	PolicyScopeCluster    PolicyScope = "cluster"
)

// PolicyScopeProperty is the result property that holds the result's PolicyScope. A result
// without it counts as cluster-wide.
const PolicyScopeProperty = "regent.dev/policy-scope"

// Policy label prefixes, one per PolicyScope, so a namespaced and a cluster-wide policy of the same
// name never share a label.
const (
	NamespacedPolicyLabelPrefix = "pol.reports.regent.dev/"
	ClusterPolicyLabelPrefix    = "cpol.reports.regent.dev/"
)

// PolicyLabelKey is the key of the label that records the version (generation or resourceVersion)
// of the policy whose results a report holds: "<prefix>/<name>" when the name is a valid label
// name (at most 63 characters), else "<prefix>/h-<first 40 hex digits of sha256(name)>"; in the
// hashed case the report also carries an annotation with the same key whose value is the full
// name (hashed reports true), so the name is never lost.
func PolicyLabelKey(scope PolicyScope, name string) (key string, hashed bool) {
	prefix := ClusterPolicyLabelPrefix
	if scope == PolicyScopeNamespaced {
		prefix = NamespacedPolicyLabelPrefix
	}
	if len(validation.IsQualifiedName(prefix+name)) == 0 && !strings.HasPrefix(name, "h-") {
		return prefix + name, false
	}
	return prefix + "h-" + hash(name)[:40], true
}

// LabelSafe returns v when it is a valid label value, else "h-" and 40 hex digits of its sha256.
func LabelSafe(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 && !strings.HasPrefix(v, "h-") {
		return v
	}
	return "h-" + hash(v)[:40]
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
