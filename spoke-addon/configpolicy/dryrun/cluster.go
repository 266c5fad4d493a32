package dryrun

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// clusterScoped are client-go's kinds that live outside namespaces; every other kind of its
// scheme is namespaced. (The scheme knows kinds, not their scope: discovery would, and there is
// no apiserver to ask.)
var clusterScoped = map[string]bool{
	"Namespace": true, "Node": true, "PersistentVolume": true, "ComponentStatus": true,
	"ClusterRole": true, "ClusterRoleBinding": true, "StorageClass": true, "CSIDriver": true,
	"CSINode": true, "VolumeAttachment": true, "VolumeAttributesClass": true, "PriorityClass": true,
	"RuntimeClass": true, "IngressClass": true, "ValidatingWebhookConfiguration": true,
	"MutatingWebhookConfiguration": true, "ValidatingAdmissionPolicy": true,
	"ValidatingAdmissionPolicyBinding": true, "MutatingAdmissionPolicy": true,
	"MutatingAdmissionPolicyBinding": true, "CertificateSigningRequest": true,
	"ClusterTrustBundle": true, "FlowSchema": true, "PriorityLevelConfiguration": true,
	"StorageVersion": true, "StorageVersionMigration": true, "IPAddress": true, "ServiceCIDR": true,
	"DeviceClass": true, "ResourceSlice": true, "DeviceTaintRule": true,
}

// restMapper maps client-go's kinds and the kinds of objects: a kind client-go does not know is
// namespaced when an object of it has a namespace.
func restMapper(objects []*unstructured.Unstructured) meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for gvk := range clientgoscheme.Scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || strings.HasSuffix(gvk.Kind, "List") || strings.HasSuffix(gvk.Kind, "Options") {
			continue
		}
		m.Add(gvk, scope(clusterScoped[gvk.Kind]))
	}
	for _, o := range objects {
		gvk := o.GroupVersionKind()
		if _, err := m.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			continue
		}
		m.Add(gvk, scope(o.GetNamespace() == ""))
	}
	return m
}

func scope(cluster bool) meta.RESTScope {
	if cluster {
		return meta.RESTScopeRoot
	}
	return meta.RESTScopeNamespace
}

// newCluster is an in-memory cluster holding objects, each namespaced one without a namespace
// put in "default", and every namespace they use. Objects stay unstructured (an empty scheme):
// converting them to client-go's types would add the empty fields typed objects carry, which the
// comparison would then see.
func newCluster(ctx context.Context, mapper meta.RESTMapper, objects []*unstructured.Unstructured) (client.WithWatch, error) {
	var objs []client.Object
	namespaces := map[string]bool{"default": true}
	declared := map[string]bool{}
	for _, o := range objects {
		o = o.DeepCopy()
		gvk := o.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
		}
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if o.GetNamespace() == "" {
				o.SetNamespace("default")
			}
			namespaces[o.GetNamespace()] = true
		} else {
			o.SetNamespace("")
		}
		if gvk.GroupKind() == (schema.GroupKind{Kind: "Namespace"}) {
			declared[o.GetName()] = true
		}
		objs = append(objs, o)
	}
	names := make([]string, 0, len(namespaces))
	for ns := range namespaces {
		if !declared[ns] {
			names = append(names, ns)
		}
	}
	slices.Sort(names)
	for _, ns := range names {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("Namespace")
		u.SetName(ns)
		objs = append(objs, u)
	}
	// A plain tracker: the field-managing one cannot compare unstructured objects of different
	// kinds in one scheme, and managed fields are no part of what a policy looks at.
	sch := runtime.NewScheme()
	tracker := clienttesting.NewObjectTracker(sch, serializer.NewCodecFactory(sch).UniversalDecoder())
	c := fake.NewClientBuilder().WithScheme(sch).WithRESTMapper(mapper).WithObjectTracker(tracker).Build()
	// Created one by one rather than handed to the builder, which panics on a bad object.
	for _, o := range objs {
		o.SetResourceVersion("")
		if err := c.Create(ctx, o); err != nil {
			return nil, fmt.Errorf("%s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, client.ObjectKeyFromObject(o), err)
		}
	}
	return metadataLists{c}, nil
}

// metadataLists answers metadata-only lists (how the controller lists namespaces) from the
// unstructured objects the in-memory cluster holds, which it cannot convert itself.
type metadataLists struct{ client.WithWatch }

func (c metadataLists) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	partial, ok := list.(*metav1.PartialObjectMetadataList)
	if !ok {
		return c.WithWatch.List(ctx, list, opts...)
	}
	all := &unstructured.UnstructuredList{}
	all.SetGroupVersionKind(partial.GroupVersionKind())
	if err := c.WithWatch.List(ctx, all, opts...); err != nil {
		return err
	}
	partial.Items = make([]metav1.PartialObjectMetadata, 0, len(all.Items))
	for _, u := range all.Items {
		item := metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: u.GetAPIVersion(), Kind: u.GetKind()}}
		item.Name, item.Namespace, item.Labels, item.Annotations, item.UID = u.GetName(), u.GetNamespace(), u.GetLabels(), u.GetAnnotations(), u.GetUID()
		partial.Items = append(partial.Items, item)
	}
	return nil
}

// recorder is a cluster that records every change written through it, with the object before.
type recorder struct {
	client.WithWatch
	changes []Change
}

func isDryRun(opts []string) bool { return slices.Contains(opts, metav1.DryRunAll) }

func (r *recorder) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	o := &client.CreateOptions{}
	o.ApplyOptions(opts)
	if err := r.WithWatch.Create(ctx, obj, opts...); err != nil || isDryRun(o.DryRun) {
		return err
	}
	r.record(ActionCreate, nil, obj)
	return nil
}

func (r *recorder) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	o := &client.UpdateOptions{}
	o.ApplyOptions(opts)
	if isDryRun(o.DryRun) {
		return r.WithWatch.Update(ctx, obj, opts...)
	}
	before := &unstructured.Unstructured{}
	before.SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	if err := r.WithWatch.Get(ctx, client.ObjectKeyFromObject(obj), before); err != nil {
		return err
	}
	if err := r.WithWatch.Update(ctx, obj, opts...); err != nil {
		return err
	}
	r.record(ActionUpdate, before, obj)
	return nil
}

func (r *recorder) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	o := &client.DeleteOptions{}
	o.ApplyOptions(opts)
	if err := r.WithWatch.Delete(ctx, obj, opts...); err != nil || isDryRun(o.DryRun) {
		return err
	}
	r.record(ActionDelete, obj, nil)
	return nil
}

func (r *recorder) record(action Action, before, after client.Object) {
	subject := after
	if subject == nil {
		subject = before
	}
	gvk := subject.GetObjectKind().GroupVersionKind()
	r.changes = append(r.changes, Change{
		Action: action, APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
		Namespace: subject.GetNamespace(), Name: subject.GetName(),
		Diff: diff(subject.GetNamespace(), subject.GetName(), before, after),
	})
}
