package v1alpha1

import (
	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ResourceReportSpec is what a per-resource report holds: the results of every policy evaluated
// against the resource, in the openreports result format so the aggregator copies them unchanged.
type ResourceReportSpec struct {
	// Results of the policies evaluated against the resource. A result names no resource: its
	// subject is the report's owner, and the aggregator adds it. A namespaced policy's result
	// carries PolicyScopeProperty; a result without it is a cluster-wide policy's.
	// +optional
	// +listType=atomic
	Results []openreportsv1alpha1.ReportResult `json:"results,omitempty"`
}

// ResourceReport holds the policy results of one namespaced resource. Its name is the resource's
// UID and its ownerReference the resource, so it is deleted with the resource.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=rrep
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.metadata.labels.reports\.regent\.dev/resource-kind`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.metadata.labels.reports\.regent\.dev/source`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ResourceReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ResourceReportSpec `json:"spec,omitempty"`
}

// ResourceReportList is a list of ResourceReports.
//
// +kubebuilder:object:root=true
type ResourceReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceReport `json:"items"`
}

// ClusterResourceReport holds the policy results of one cluster-scoped resource, named by its UID
// and owned by it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=crrep
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.metadata.labels.reports\.regent\.dev/resource-kind`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.metadata.labels.reports\.regent\.dev/source`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterResourceReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ResourceReportSpec `json:"spec,omitempty"`
}

// ClusterResourceReportList is a list of ClusterResourceReports.
//
// +kubebuilder:object:root=true
type ClusterResourceReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterResourceReport `json:"items"`
}

// Object is either kind of per-resource report, so writers and the aggregator handle both alike.
//
// +kubebuilder:object:generate=false
type Object interface {
	client.Object
	ReportSpec() *ResourceReportSpec
}

// ReportSpec returns the report's spec.
func (r *ResourceReport) ReportSpec() *ResourceReportSpec { return &r.Spec }

// ReportSpec returns the report's spec.
func (r *ClusterResourceReport) ReportSpec() *ResourceReportSpec { return &r.Spec }

func init() {
	SchemeBuilder.Register(&ResourceReport{}, &ResourceReportList{}, &ClusterResourceReport{}, &ClusterResourceReportList{})
}
