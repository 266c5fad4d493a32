// Package v1 holds the policy.open-cluster-management.io/v1 kinds Regent serves on the hub and on
// managed clusters: Policy and PlacementBinding, schema-compatible with OCM's governance framework
// so that existing policy YAML applies unchanged, plus the rollout fields of OCM's "policy placement
// strategy" design (spec.rolloutStrategy, status.rolloutStatus) that OCM itself never shipped.
//
// +kubebuilder:object:generate=true
// +groupName=policy.open-cluster-management.io
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "policy.open-cluster-management.io", Version: "v1"}
	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
