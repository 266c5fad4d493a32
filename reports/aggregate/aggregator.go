package aggregate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/reports"
)

// Labels on every Report the aggregator writes. LabelAggregatedBy marks ownership: only Reports
// carrying it are ever updated or deleted.
const (
	LabelAggregatedBy = "reports.regent.dev/aggregated-by"
	AggregatorName    = "regent-reports-aggregator"
	LabelPolicy       = "reports.regent.dev/policy"
	LabelPolicyScope  = "reports.regent.dev/policy-scope"
	LabelPart         = "reports.regent.dev/part"
	AnnotationPolicy  = "reports.regent.dev/policy"
	ReportSource      = "regent"
	DefaultDebounce   = 2 * time.Second
	controllerName    = "reports-aggregator"
)

// Aggregator merges the per-resource reports of each namespace it owns into openreports Reports.
//
// Memory is bounded by one namespace, not by the cluster: the aggregator's own informers keep
// only the name, namespace and ownership label of each report (enough to know which namespace
// changed), and a merge reads that namespace's reports from the apiserver page by page. Kyverno's
// reports controller caches every report whole, which is what makes it grow with the cluster.
type Aggregator struct {
	// Client writes Reports.
	Client client.Client
	// Reader reads the reports of the namespace being merged: an uncached reader (the
	// manager's API reader) in production; Client when nil.
	Reader client.Reader
	// Shard selects the namespaces this aggregator owns; the zero value owns all.
	Shard Shard
	// Debounce is how long a namespace waits after a change before it is merged, so a burst of
	// report writes costs one merge; DefaultDebounce when zero.
	Debounce time.Duration
	// MaxResults bounds the results of one Report; DefaultMaxResults when zero.
	MaxResults int
}

// SetupWithManager watches per-resource reports and the Reports the aggregator owns (so a Report
// edited or deleted by someone else is repaired) and enqueues their namespace. The watches run on
// a metadata-only cache of the aggregator's own (see Aggregator), whatever the manager's cache
// options are.
func (a *Aggregator) SetupWithManager(mgr ctrl.Manager) error {
	if a.Client == nil {
		a.Client = mgr.GetClient()
		a.Reader = mgr.GetAPIReader()
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:           mgr.GetScheme(),
		Mapper:           mgr.GetRESTMapper(),
		HTTPClient:       mgr.GetHTTPClient(),
		DefaultTransform: minimalMetadata,
	})
	if err != nil {
		return fmt.Errorf("reports aggregator cache: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return err
	}
	all := a.enqueueNamespace(func(client.Object) bool { return true })
	owned := a.enqueueNamespace(func(o client.Object) bool { return o.GetLabels()[LabelAggregatedBy] == AggregatorName })
	return ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		WatchesRawSource(source.Kind(c, reports.MetadataOf(reportsv1alpha1.GroupVersion.WithKind("ResourceReport")), all)).
		WatchesRawSource(source.Kind(c, reports.MetadataOf(reportsv1alpha1.GroupVersion.WithKind("ClusterResourceReport")), all)).
		WatchesRawSource(source.Kind(c, reports.MetadataOf(openreportsv1alpha1.SchemeGroupVersion.WithKind("Report")), owned)).
		WatchesRawSource(source.Kind(c, reports.MetadataOf(openreportsv1alpha1.SchemeGroupVersion.WithKind("ClusterReport")), owned)).
		Complete(a)
}

// enqueueNamespace adds the object's namespace after the debounce; a namespace already waiting
// keeps its earlier time, so changes coalesce instead of postponing the merge forever.
func (a *Aggregator) enqueueNamespace(keep func(client.Object) bool) handler.TypedEventHandler[*metav1.PartialObjectMetadata, reconcile.Request] {
	return reports.Debounced(a.debounce, func(o *metav1.PartialObjectMetadata) (reconcile.Request, bool) {
		if o == nil || !keep(o) || !a.Shard.Owns(o.GetNamespace()) {
			return reconcile.Request{}, false
		}
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace()}}, true
	})
}

func (a *Aggregator) debounce() time.Duration {
	if a.Debounce == 0 {
		return DefaultDebounce
	}
	return a.Debounce
}

// Reconcile merges the namespace req.Namespace ("" for the cluster scope): it writes every
// expected Report whose content changed and deletes the owned Reports no longer expected.
func (a *Aggregator) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ns := req.Namespace
	if !a.Shard.Owns(ns) {
		return reconcile.Result{}, nil
	}
	specs, err := a.sources(ctx, ns)
	if err != nil {
		return reconcile.Result{}, err
	}
	actual, err := a.owned(ctx, ns)
	if err != nil {
		return reconcile.Result{}, err
	}
	var errs []error
	for _, d := range Merge(specs, a.MaxResults) {
		cur, exists := actual[d.Name]
		delete(actual, d.Name)
		if err := a.write(ctx, ns, d, cur, exists); err != nil {
			errs = append(errs, err)
		}
	}
	stale := make([]string, 0, len(actual))
	for name := range actual {
		stale = append(stale, name)
	}
	slices.Sort(stale)
	for _, name := range stale {
		if err := a.Client.Delete(ctx, actual[name]); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete stale report %s/%s: %w", ns, name, err))
			continue
		}
		writes.WithLabelValues("delete").Inc()
	}
	return reconcile.Result{}, errors.Join(errs...)
}

// listPage bounds what one list response holds in memory while a namespace is read.
const listPage = 500

// sources reads the results of every per-resource report of ns, a page at a time; only the specs
// are kept, so a page's metadata is garbage as soon as the next page arrives.
func (a *Aggregator) sources(ctx context.Context, ns string) ([]*reportsv1alpha1.ResourceReportSpec, error) {
	var specs []*reportsv1alpha1.ResourceReportSpec
	for cont := ""; ; {
		opts := []client.ListOption{client.Limit(listPage), client.Continue(cont)}
		if ns == "" {
			var list reportsv1alpha1.ClusterResourceReportList
			if err := a.reader().List(ctx, &list, opts...); err != nil {
				return nil, fmt.Errorf("list cluster resource reports: %w", err)
			}
			for i := range list.Items {
				specs = append(specs, &reportsv1alpha1.ResourceReportSpec{Results: reports.WithSubjects(&list.Items[i])})
			}
			cont = list.Continue
		} else {
			var list reportsv1alpha1.ResourceReportList
			if err := a.reader().List(ctx, &list, append(opts, client.InNamespace(ns))...); err != nil {
				return nil, fmt.Errorf("list resource reports in %s: %w", ns, err)
			}
			for i := range list.Items {
				specs = append(specs, &reportsv1alpha1.ResourceReportSpec{Results: reports.WithSubjects(&list.Items[i])})
			}
			cont = list.Continue
		}
		if cont == "" {
			return specs, nil
		}
	}
}

func (a *Aggregator) reader() client.Reader {
	if a.Reader != nil {
		return a.Reader
	}
	return a.Client
}

// owned returns the Reports (ClusterReports for "") of ns that the aggregator wrote, by name.
func (a *Aggregator) owned(ctx context.Context, ns string) (map[string]client.Object, error) {
	out := map[string]client.Object{}
	mine := client.MatchingLabels{LabelAggregatedBy: AggregatorName}
	if ns == "" {
		var list openreportsv1alpha1.ClusterReportList
		if err := a.reader().List(ctx, &list, mine); err != nil {
			return nil, fmt.Errorf("list cluster reports: %w", err)
		}
		for i := range list.Items {
			out[list.Items[i].Name] = &list.Items[i]
		}
		return out, nil
	}
	var list openreportsv1alpha1.ReportList
	if err := a.reader().List(ctx, &list, client.InNamespace(ns), mine); err != nil {
		return nil, fmt.Errorf("list reports in %s: %w", ns, err)
	}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

// write creates the Report of d, or updates cur when its serialised content differs from d's; an
// unchanged Report costs no request.
func (a *Aggregator) write(ctx context.Context, ns string, d Desired, cur client.Object, exists bool) error {
	var obj client.Object
	switch {
	case exists:
		obj = cur.DeepCopyObject().(client.Object)
	case ns == "":
		obj = &openreportsv1alpha1.ClusterReport{}
	default:
		obj = &openreportsv1alpha1.Report{}
	}
	obj.SetName(d.Name)
	obj.SetNamespace(ns)
	fill(obj, d)
	if !exists {
		if err := a.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("create report %s/%s: %w", ns, d.Name, err)
		}
		writes.WithLabelValues("create").Inc()
		return nil
	}
	before, err := json.Marshal(cur)
	if err != nil {
		return err
	}
	after, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	if bytes.Equal(before, after) {
		return nil
	}
	if err := a.Client.Update(ctx, obj); err != nil {
		if apierrors.IsConflict(err) {
			// Someone wrote the Report between our read and write; its event requeues the namespace.
			return fmt.Errorf("update report %s/%s (concurrent write, retried): %w", ns, d.Name, err)
		}
		return fmt.Errorf("update report %s/%s: %w", ns, d.Name, err)
	}
	writes.WithLabelValues("update").Inc()
	return nil
}

// fill sets the aggregator's fields of a Report or ClusterReport from d, leaving others (labels
// someone else added, metadata) as they are.
func fill(obj client.Object, d Desired) {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelAggregatedBy] = AggregatorName
	labels[LabelPolicy] = reportsv1alpha1.LabelSafe(d.Policy)
	labels[LabelPolicyScope] = string(d.Scope)
	labels[LabelPart] = strconv.Itoa(d.Part)
	obj.SetLabels(labels)
	annotations := obj.GetAnnotations()
	if labels[LabelPolicy] != d.Policy {
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[AnnotationPolicy] = d.Policy
	} else {
		delete(annotations, AnnotationPolicy)
		if len(annotations) == 0 {
			annotations = nil
		}
	}
	obj.SetAnnotations(annotations)
	switch r := obj.(type) {
	case *openreportsv1alpha1.Report:
		r.Source, r.Summary, r.Results = ReportSource, d.Summary, d.Results
	case *openreportsv1alpha1.ClusterReport:
		r.Source, r.Summary, r.Results = ReportSource, d.Summary, d.Results
	}
}

// DefaultMemoryLimit is the floor of the adaptive soft memory limit `regent reports-aggregator`
// runs with (see package memlimit): its live heap is a few MiB of metadata, while a merge
// allocates and frees about its namespace's reports' size; measured in docs/benchmarks.md.
const DefaultMemoryLimit = 32 << 20

// PolicyOf returns the full name of the policy whose results an aggregated Report holds: the
// annotation when the label had to be hashed, the label otherwise.
func PolicyOf(report client.Object) string {
	if name := report.GetAnnotations()[AnnotationPolicy]; name != "" {
		return name
	}
	return report.GetLabels()[LabelPolicy]
}
