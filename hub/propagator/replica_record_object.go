package propagator

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CachedReplica implements client.Object over the metadata it holds; metav1.Object lets an object
// ignore what it has no field for (a get returns the zero value, a set does nothing).

func (c *CachedReplica) GetNamespace() string                          { return c.namespace }
func (c *CachedReplica) SetNamespace(namespace string)                 { c.namespace = namespace }
func (c *CachedReplica) GetName() string                               { return c.name }
func (c *CachedReplica) SetName(name string)                           { c.name = name }
func (c *CachedReplica) GetGenerateName() string                       { return c.specHash }
func (c *CachedReplica) SetGenerateName(name string)                   { c.specHash = name }
func (c *CachedReplica) GetUID() types.UID                             { return c.uid }
func (c *CachedReplica) SetUID(uid types.UID)                          { c.uid = uid }
func (c *CachedReplica) GetResourceVersion() string                    { return c.resourceVersion }
func (c *CachedReplica) SetResourceVersion(version string)             { c.resourceVersion = version }
func (c *CachedReplica) GetGeneration() int64                          { return c.generation }
func (c *CachedReplica) SetGeneration(generation int64)                { c.generation = generation }
func (c *CachedReplica) GetSelfLink() string                           { return "" }
func (c *CachedReplica) SetSelfLink(string)                            {}
func (c *CachedReplica) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (c *CachedReplica) SetCreationTimestamp(metav1.Time)              {}
func (c *CachedReplica) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (c *CachedReplica) SetDeletionGracePeriodSeconds(*int64)          {}
func (c *CachedReplica) GetLabels() map[string]string                  { return c.labels }
func (c *CachedReplica) SetLabels(labels map[string]string)            { c.labels = labels }
func (c *CachedReplica) GetAnnotations() map[string]string             { return c.annotations }
func (c *CachedReplica) SetAnnotations(annotations map[string]string)  { c.annotations = annotations }
func (c *CachedReplica) GetFinalizers() []string                       { return nil }
func (c *CachedReplica) SetFinalizers([]string)                        {}
func (c *CachedReplica) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (c *CachedReplica) SetOwnerReferences([]metav1.OwnerReference)    {}
func (c *CachedReplica) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (c *CachedReplica) SetManagedFields([]metav1.ManagedFieldsEntry)  {}
func (c *CachedReplica) GetObjectKind() schema.ObjectKind              { return schema.EmptyObjectKind }

func (c *CachedReplica) GetDeletionTimestamp() *metav1.Time {
	if c.rare == nil {
		return nil
	}
	return c.rare.deletionTimestamp
}

func (c *CachedReplica) SetDeletionTimestamp(timestamp *metav1.Time) {
	var r rareReplicaFields
	if c.rare != nil {
		r = *c.rare
	}
	r.deletionTimestamp = timestamp
	c.rare = &r
	if timestamp == nil && len(r.conditions) == 0 && len(r.details) == 0 {
		c.rare = nil
	}
}

// DeepCopyObject copies c with its maps and slices, as a Policy's DeepCopy would.
func (c *CachedReplica) DeepCopyObject() runtime.Object {
	out := *c
	out.labels, out.annotations = maps.Clone(c.labels), maps.Clone(c.annotations)
	if c.rare != nil {
		p := c.Policy().DeepCopy()
		out.rare = &rareReplicaFields{deletionTimestamp: p.DeletionTimestamp, conditions: p.Status.Conditions, details: p.Status.Details}
	}
	return &out
}

var _ client.Object = (*CachedReplica)(nil)
