// Package v1alpha1 holds the reports.regent.dev/v1alpha1 kinds: ResourceReport and
// ClusterResourceReport, the per-resource intermediate reports of Kyverno's "reports v2" design.
// A producer (admission, background scan, ConfigurationPolicy) writes one report per evaluated
// resource, named by the resource's UID and owned by it, so the garbage collector removes the
// report with the resource; the aggregator merges them into openreports.io Reports per namespace
// and policy. Labels record the resource and the version of every policy whose results the report
// holds (see labels.go), so a producer can find the reports a policy change made stale.
//
// +kubebuilder:object:generate=true
// +groupName=reports.regent.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "reports.regent.dev", Version: "v1alpha1"}
	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
