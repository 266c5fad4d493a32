package aggregate

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// minimalMetadata is the aggregator cache's transform: an event only has to say which namespace
// changed and, for a Report, whether the aggregator owns it. Keeping nothing else makes a cached
// report cost about a hundred bytes whatever its results, labels and owners.
func minimalMetadata(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	keep := metav1.ObjectMeta{
		Name:            m.Name,
		Namespace:       m.Namespace,
		UID:             m.UID,
		ResourceVersion: m.ResourceVersion,
	}
	if v, ok := m.Labels[LabelAggregatedBy]; ok {
		keep.Labels = map[string]string{LabelAggregatedBy: v}
	}
	m.ObjectMeta = keep
	return m, nil
}
