// Package v1 holds the policies.kubewarden.io/v1 kinds Regent serves on managed clusters, a
// Kubewarden-compatible subset — ClusterAdmissionPolicy, AdmissionPolicy, PolicyServer — and
// PolicyRevision from Kubewarden's accepted "policy lifecycle" RFC, which Kubewarden itself has
// not built: every policy generation becomes a revision that the policy server's leader pulls,
// precompiles, validates and signs, and that every replica loads and reports on by replica number.
// v1alpha2 (package v1alpha2) serves the same policies under Kubewarden's older version.
//
// +kubebuilder:object:generate=true
// +groupName=policies.kubewarden.io
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "policies.kubewarden.io", Version: "v1"}
	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
