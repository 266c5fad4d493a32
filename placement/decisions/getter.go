package decisions

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Getter serves sdk-go's PlacementDecisionGetter from a controller-runtime reader, normally the
// manager's informer cache, so tracking decisions costs no apiserver request.
type Getter struct {
	Ctx    context.Context
	Reader client.Reader
}

// List returns the decisions in namespace that match selector. The objects are shared with the
// cache (no deep copy: the tracker only reads them) and must not be modified.
func (g Getter) List(selector labels.Selector, namespace string) ([]*clusterv1beta1.PlacementDecision, error) {
	list := &clusterv1beta1.PlacementDecisionList{}
	err := g.Reader.List(g.Ctx, list,
		client.InNamespace(namespace),
		client.MatchingLabelsSelector{Selector: selector},
		client.UnsafeDisableDeepCopy)
	if err != nil {
		return nil, fmt.Errorf("list placement decisions in %s: %w", namespace, err)
	}
	out := make([]*clusterv1beta1.PlacementDecision, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}
