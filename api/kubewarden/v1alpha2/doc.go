// Package v1alpha2 serves ClusterAdmissionPolicy and AdmissionPolicy under
// policies.kubewarden.io/v1alpha2, Kubewarden's older version, which it still serves (deprecated)
// beside v1. Kubewarden's v1alpha2 schema is its v1 schema less fields v1 added, so Regent serves
// v1alpha2 with exactly the v1 schema: the CRD converts between them with `conversion: None`, a
// Kubewarden v1alpha2 manifest applies unchanged, and a cluster whose CRDs once stored v1alpha2
// (status.storedVersions) can take Regent's CRDs, which the apiserver refuses when a stored
// version is missing. The controller reads and writes v1 only.
//
// +kubebuilder:object:generate=true
// +groupName=policies.kubewarden.io
package v1alpha2

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "policies.kubewarden.io", Version: "v1alpha2"}
	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
