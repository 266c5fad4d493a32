package templatesync

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// typedObject returns an empty typed object for the kinds the addon's other controllers watch
// typed (OCM's policy kinds: the Policy replicas, ConfigurationPolicies; the admission policy
// kinds), nil for any other. The manager's cache keeps a typed and an unstructured informer of
// one kind apart: reading those kinds unstructured would open a second watch on each and hold
// every Policy and ConfigurationPolicy twice, the second time as maps (measured in
// docs/benchmarks.md, session 9). Other kinds are read unstructured, as the ConfigurationPolicy
// controller reads them, so that they too share one informer.
func typedObject(s *runtime.Scheme, gvk schema.GroupVersionKind) client.Object {
	if gvk.Group != PolicyGroup && gvk.Group != KubewardenGroup {
		return nil
	}
	obj, err := s.New(gvk)
	if err != nil {
		return nil
	}
	o, _ := obj.(client.Object)
	return o
}

// watchObject is the object a watch on gvk is started with: typed where typedObject is.
func watchObject(s *runtime.Scheme, gvk schema.GroupVersionKind) client.Object {
	if o := typedObject(s, gvk); o != nil {
		return o
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// get reads the object of kind gvk at key as unstructured, through the informer watchObject
// names.
func (r *Reconciler) get(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey) (*unstructured.Unstructured, error) {
	typed := typedObject(r.Client.Scheme(), gvk)
	if typed == nil {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if err := r.Client.Get(ctx, key, u); err != nil {
			return nil, err
		}
		return u, nil
	}
	if err := r.Client.Get(ctx, key, typed); err != nil {
		return nil, err
	}
	return toUnstructured(typed, gvk)
}

// list lists objects of kind gvk as unstructured, through the informer watchObject names.
func (r *Reconciler) list(ctx context.Context, gvk schema.GroupVersionKind, opts ...client.ListOption) ([]*unstructured.Unstructured, error) {
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	if typedObject(r.Client.Scheme(), gvk) != nil {
		if obj, err := r.Client.Scheme().New(listGVK); err == nil {
			if typed, ok := obj.(client.ObjectList); ok {
				if err := r.Client.List(ctx, typed, opts...); err != nil {
					return nil, err
				}
				items, err := meta.ExtractList(typed)
				if err != nil {
					return nil, err
				}
				out := make([]*unstructured.Unstructured, 0, len(items))
				for _, item := range items {
					u, err := toUnstructured(item, gvk)
					if err != nil {
						return nil, err
					}
					out = append(out, u)
				}
				return out, nil
			}
		}
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(listGVK)
	if err := r.Client.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func toUnstructured(obj runtime.Object, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %s: %w", gvk.Kind, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}
