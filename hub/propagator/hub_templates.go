package propagator

import (
	"context"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/templates"
)

// hubTemplatesAnnotation on a replica built from hub templates holds the SpecHash of the root's
// spec it was resolved from, then that of the resolved spec. The first is what the rollout
// compares (every cluster's replica carries "this version of the root" although each differs);
// the second makes a change of what the templates read a new write.
const hubTemplatesAnnotation = "regent.dev/hub-templates-hash"

var managedClusterGVK = clusterv1.SchemeGroupVersion.WithKind("ManagedCluster")

// hasHubTemplates says whether root's replicas must be resolved per cluster.
func hasHubTemplates(root *policyv1.Policy) bool {
	if strings.EqualFold(root.Annotations[templates.DisableAnnotation], "true") {
		return false
	}
	for _, t := range root.Spec.PolicyTemplates {
		if t != nil && templates.HasTemplates(t.ObjectDefinition.Raw, true) {
			return true
		}
	}
	return false
}

// resolveHubTemplates returns spec with the hub templates of its policy templates resolved for
// cluster. Without spec.hubTemplateOptions.serviceAccountName templates read only the root's
// namespace and their cluster's ManagedCluster, as OCM allows; with it, whatever that
// ServiceAccount may list and watch (hub_template_access.go).
// Values read from Secrets (fromSecret, copySecretData) and piped into protect are encrypted with
// enc, as OCM does; each template that encrypted something carries the IV annotation.
func (r *Reconciler) resolveHubTemplates(ctx context.Context, run *hubTemplateRun, cluster string, spec *policyv1.PolicySpec, enc *replicaEncryption) (*policyv1.PolicySpec, error) {
	root := run.root
	if run.withSA {
		if err := run.serviceAccount(ctx); err != nil {
			return nil, err
		}
	}
	// Unstructured: the hub's scheme does not carry ManagedCluster.
	mc := &unstructured.Unstructured{}
	mc.SetGroupVersionKind(managedClusterGVK)
	// .ManagedClusterLabels: a relabelled cluster re-propagates the roots with hub templates.
	if r.templateWatches != nil {
		if err := r.templateWatches.ensure(mc.GroupVersionKind(), client.ObjectKeyFromObject(root), ""); err != nil {
			return nil, err
		}
	}
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: cluster}, mc); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read ManagedCluster %s for hub templates: %w", cluster, err)
	}
	cfg := templates.Config{
		Hub:     true,
		Protect: enc.protect,
		Reader:  &hubReader{r: r, run: run},
		Data: map[string]any{
			"ManagedClusterName":   cluster,
			"ManagedClusterLabels": mc.GetLabels(),
			"PolicyMetadata": map[string]any{
				"name": root.Name, "namespace": root.Namespace, "labels": root.Labels, "annotations": root.Annotations,
			},
		},
	}
	if !run.withSA {
		cfg.Namespace = root.Namespace
		cfg.ClusterScopedAllowList = []templates.ClusterScopedObject{{Group: managedClusterGVK.Group, Kind: managedClusterGVK.Kind, Name: cluster}}
	}
	out := spec.DeepCopy()
	for i, t := range out.PolicyTemplates {
		if t == nil || !templates.HasTemplates(t.ObjectDefinition.Raw, true) {
			continue
		}
		before := enc.calls
		raw, err := templates.ResolveJSON(ctx, t.ObjectDefinition.Raw, cfg)
		if err != nil {
			return nil, fmt.Errorf("policy-templates[%d]: %w", i, err)
		}
		if iv := enc.ivAnnotation(); iv != "" && enc.calls > before {
			if raw, err = annotateIV(raw, iv); err != nil {
				return nil, fmt.Errorf("policy-templates[%d]: %w", i, err)
			}
		}
		out.PolicyTemplates[i].ObjectDefinition.Raw = raw
	}
	return out, nil
}

// writeTemplatedSpec is writeSpec for a root with hub templates: the replica carries the spec
// resolved for its cluster, and is current when both hashes of hubTemplatesAnnotation are.
// A template that does not resolve leaves the replica as it is; the error is the cluster's
// write failure, which the root reports.
func (r *Reconciler) writeTemplatedSpec(ctx context.Context, run *hubTemplateRun, cluster string, spec *policyv1.PolicySpec, hash string, existing *CachedReplica) (int64, error) {
	root := run.root
	enc := &replicaEncryption{r: r, ctx: ctx, cluster: cluster, existing: existing}
	resolved, err := r.resolveHubTemplates(ctx, run, cluster, spec, enc)
	if err != nil {
		return 0, fmt.Errorf("hub templates of %s/%s for cluster %s: %w", root.Namespace, root.Name, cluster, err)
	}
	want := newReplica(root, cluster, resolved)
	if want.Annotations == nil {
		want.Annotations = map[string]string{}
	}
	want.Annotations[hubTemplatesAnnotation] = hash + "." + SpecHash(resolved)
	// OCM keeps the IV on the replica too: the next resolution reuses it.
	if iv := enc.ivAnnotation(); iv != "" {
		want.Annotations[templates.IVAnnotation] = iv
	}
	if existing != nil && labelsMatch(existing, want.Labels) && mapsEqual(existing.annotations, want.Annotations) {
		return 0, nil
	}
	if existing == nil {
		if err := r.Client.Create(ctx, want); err != nil {
			return 0, fmt.Errorf("create replica %s/%s: %w", cluster, want.Name, err)
		}
		r.expect.wrote(replicaKey(root, cluster), "", want.ResourceVersion)
		writes.WithLabelValues("create", "policies").Inc()
		return want.Generation, nil
	}
	want.Status = existing.status()
	if err := r.update(ctx, want, existing.resourceVersion); err != nil {
		return 0, fmt.Errorf("update replica %s/%s: %w", cluster, want.Name, err)
	}
	return want.Generation, nil
}

// templatedHash is the root-spec hash a replica built from hub templates records, if it is one.
func templatedHash(annotations map[string]string) (string, bool) {
	v, ok := annotations[hubTemplatesAnnotation]
	if !ok {
		return "", false
	}
	// Both hashes start with specHashPrefix, which has dots of its own: cut where the second
	// one starts, not at the first dot.
	unresolved, _, _ := strings.Cut(v, "."+specHashPrefix)
	return unresolved, true
}

// hubReader reads for hub templates through the hub's cache, and watches what it read so a
// change of an object a root's templates read re-propagates that root. With a ServiceAccount, a
// read is made only once the ServiceAccount is found allowed to make it.
type hubReader struct {
	r   *Reconciler
	run *hubTemplateRun
}

// prepare authorizes a read of the kind in namespace (name empty for a list) and watches the kind.
func (h *hubReader) prepare(ctx context.Context, apiVersion, kind, namespace, name string) (schema.GroupVersionKind, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("apiVersion %q: %w", apiVersion, err)
	}
	gvk := gv.WithKind(kind)
	if h.run.withSA {
		if err := h.run.authorize(ctx, gvk, namespace, name); err != nil {
			return gvk, err
		}
	}
	if h.r.templateWatches != nil {
		if err := h.r.templateWatches.ensure(gvk, client.ObjectKeyFromObject(h.run.root), namespace); err != nil {
			return gvk, err
		}
	}
	return gvk, nil
}

func (h *hubReader) Get(ctx context.Context, apiVersion, kind, namespace, name string) (*unstructured.Unstructured, error) {
	gvk, err := h.prepare(ctx, apiVersion, kind, namespace, name)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	if err := h.r.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return obj, nil
}

func (h *hubReader) List(ctx context.Context, apiVersion, kind, namespace, selector string) ([]unstructured.Unstructured, error) {
	gvk, err := h.prepare(ctx, apiVersion, kind, namespace, "")
	if err != nil {
		return nil, err
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("label selector %q: %w", selector, err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(kind + "List"))
	if err := h.r.Reader.List(ctx, list, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// templateWatches starts one watch per kind hub templates read, on first use, and maps an event
// to the roots whose templates read that kind in the object's namespace. Only kinds templates
// read are cached, never every Secret of the hub up front.
type templateWatches struct {
	mu         sync.Mutex
	cache      cache.Cache
	controller controller.Controller
	started    map[schema.GroupVersionKind]bool
	// readers holds, by kind, the roots whose templates read it and in which namespaces; ""
	// stands for all of them and for the cluster scope (a list across namespaces, the
	// ManagedCluster).
	readers map[schema.GroupVersionKind]map[types.NamespacedName]map[string]bool
}

func (w *templateWatches) ensure(gvk schema.GroupVersionKind, root types.NamespacedName, namespace string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.readers[gvk] == nil {
		w.readers[gvk] = map[types.NamespacedName]map[string]bool{}
	}
	if w.readers[gvk][root] == nil {
		w.readers[gvk][root] = map[string]bool{}
	}
	w.readers[gvk][root][namespace] = true
	if w.started[gvk] {
		return nil
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	if err := w.controller.Watch(source.Kind[client.Object](w.cache, obj, handler.EnqueueRequestsFromMapFunc(w.rootsReading(gvk)))); err != nil {
		return fmt.Errorf("watch %s for hub templates: %w", gvk, err)
	}
	w.started[gvk] = true
	return nil
}

// rootsReading maps an object of kind gvk to the roots whose templates read its namespace.
func (w *templateWatches) rootsReading(gvk schema.GroupVersionKind) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		w.mu.Lock()
		defer w.mu.Unlock()
		var out []reconcile.Request
		for root, namespaces := range w.readers[gvk] {
			if namespaces[""] || namespaces[o.GetNamespace()] {
				out = append(out, reconcile.Request{NamespacedName: root})
			}
		}
		return out
	}
}
