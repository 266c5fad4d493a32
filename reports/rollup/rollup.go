package rollup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	policyv1 "regent.dev/regent/api/policy/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/reports"
	"regent.dev/regent/reports/aggregate"
	"regent.dev/regent/spoke-addon/templatesync"
)

// Labels of a rolled-up Report on the hub. The root-policy and cluster-name labels are OCM's, as
// on the replicated Policy the summary is named after, so `kubectl get reports -A -l
// policy.open-cluster-management.io/root-policy=<ns>.<name>` lists a root policy's clusters.
const (
	LabelRolledUpBy = "reports.regent.dev/rolled-up-by"
	RollupName      = "regent-reports-rollup"
	LabelRootPolicy = "policy.open-cluster-management.io/root-policy"
	LabelCluster    = "policy.open-cluster-management.io/cluster-name"
	DefaultDebounce = 2 * time.Second
	controllerName  = "reports-rollup"
)

// Rollup writes the cluster's per-policy summaries into the cluster namespace on the hub.
type Rollup struct {
	// Local reads the policy templates of the cluster (the addon manager's cached client).
	Local client.Reader
	// Reports reads the aggregated Reports, a page at a time: an uncached reader (the manager's
	// API reader), so the addon never holds every result of the cluster in memory, as the
	// aggregator does not either. Local when nil.
	Reports client.Reader
	// HubReader reads the cluster namespace on the hub (the hub cache); HubWriter writes there.
	HubReader client.Reader
	HubWriter client.Client
	// ClusterName is the managed cluster: its namespace on the hub and the namespace of its
	// replicated policies on the cluster.
	ClusterName string
	Limits      Limits
	// Debounce is how long a change waits before the summaries are recomputed, so a burst of
	// aggregator writes costs one roll-up; DefaultDebounce when zero.
	Debounce time.Duration
}

// SetupWithManager watches the aggregated Reports and the policy templates on the cluster, and
// the summaries and replicated Policies on the hub (so a summary edited or deleted there is
// repaired, and one whose Policy arrives or goes is written or removed).
func (r *Rollup) SetupWithManager(mgr ctrl.Manager, hub cluster.Cluster) error {
	if r.Local == nil {
		r.Local = mgr.GetClient()
		r.Reports = mgr.GetAPIReader()
	}
	if r.HubReader == nil {
		r.HubReader = hub.GetCache()
	}
	if r.HubWriter == nil {
		r.HubWriter = hub.GetClient()
	}
	aggregated := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[aggregate.LabelAggregatedBy] == aggregate.AggregatorName
	})
	rolledUp := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[LabelRolledUpBy] == RollupName })
	// A template's owner is in its labels; its status changes at every evaluation and matters not.
	templates := predicate.LabelChangedPredicate{}
	comesOrGoes := predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}
	local, remote := mgr.GetCache(), hub.GetCache()
	return ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		// Metadata only: an event says a report changed; the roll-up reads it when it runs.
		WatchesRawSource(source.Kind[client.Object](local, reports.MetadataOf(openreportsv1alpha1.SchemeGroupVersion.WithKind("Report")), r.enqueue(), aggregated)).
		WatchesRawSource(source.Kind[client.Object](local, reports.MetadataOf(openreportsv1alpha1.SchemeGroupVersion.WithKind("ClusterReport")), r.enqueue(), aggregated)).
		WatchesRawSource(source.Kind[client.Object](local, &kubewardenv1.ClusterAdmissionPolicy{}, r.enqueue(), templates)).
		WatchesRawSource(source.Kind[client.Object](local, &kubewardenv1.AdmissionPolicy{}, r.enqueue(), templates)).
		WatchesRawSource(source.Kind[client.Object](local, &policyv1.ConfigurationPolicy{}, r.enqueue(), templates)).
		WatchesRawSource(source.Kind[client.Object](remote, &openreportsv1alpha1.Report{}, r.enqueue(), rolledUp)).
		WatchesRawSource(source.Kind[client.Object](remote, &policyv1.Policy{}, r.enqueue(), comesOrGoes)).
		Complete(r)
}

// enqueue adds the one work item (the cluster) after the debounce.
func (r *Rollup) enqueue() handler.EventHandler {
	return reports.Debounced(r.debounce, func(client.Object) (reconcile.Request, bool) {
		return reconcile.Request{NamespacedName: types.NamespacedName{Name: r.ClusterName}}, true
	})
}

func (r *Rollup) debounce() time.Duration {
	if r.Debounce == 0 {
		return DefaultDebounce
	}
	return r.Debounce
}

// Reconcile recomputes every summary of the cluster, writes those that changed and deletes those
// of policies that have no results, no template or no replica on the hub any more.
func (r *Rollup) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	summaries, err := r.summaries(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	var replicas policyv1.PolicyList
	if err := r.HubReader.List(ctx, &replicas, client.InNamespace(r.ClusterName)); err != nil {
		return reconcile.Result{}, fmt.Errorf("list replicated policies on the hub: %w", err)
	}
	uids := map[string]types.UID{}
	for i := range replicas.Items {
		if replicas.Items[i].DeletionTimestamp.IsZero() {
			uids[replicas.Items[i].Name] = replicas.Items[i].UID
		}
	}
	var current openreportsv1alpha1.ReportList
	if err := r.HubReader.List(ctx, &current, client.InNamespace(r.ClusterName), client.MatchingLabels{LabelRolledUpBy: RollupName}); err != nil {
		return reconcile.Result{}, fmt.Errorf("list rolled-up reports on the hub: %w", err)
	}
	actual := map[string]*openreportsv1alpha1.Report{}
	for i := range current.Items {
		actual[current.Items[i].Name] = &current.Items[i]
	}
	var errs []error
	for _, s := range summaries {
		uid, ok := uids[s.Replicated]
		if !ok {
			continue // the hub removed the replica: its summary goes with it below
		}
		cur := actual[s.Replicated]
		delete(actual, s.Replicated)
		if err := r.write(ctx, s, uid, cur); err != nil {
			errs = append(errs, err)
		}
	}
	stale := make([]string, 0, len(actual))
	for name := range actual {
		stale = append(stale, name)
	}
	slices.Sort(stale)
	for _, name := range stale {
		if err := r.HubWriter.Delete(ctx, actual[name]); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete rolled-up report %s/%s: %w", r.ClusterName, name, err))
			continue
		}
		writes.WithLabelValues("delete").Inc()
	}
	return reconcile.Result{}, errors.Join(errs...)
}

// listPage bounds how many aggregated reports one read holds.
const listPage = 100

// summaries reads the aggregated Reports and ClusterReports a page at a time, maps each to its
// replicated policy and sums them; reports of policies no template of this cluster's policies
// created are left out.
func (r *Rollup) summaries(ctx context.Context) ([]Summary, error) {
	reader := r.Reports
	if reader == nil {
		reader = r.Local
	}
	type reported struct {
		scope           reportsv1alpha1.PolicyScope
		namespace, name string
	}
	owners := map[reported]string{}
	ownerOf := func(o client.Object) (string, error) {
		key := reported{scope: reportsv1alpha1.PolicyScope(o.GetLabels()[aggregate.LabelPolicyScope]), name: aggregate.PolicyOf(o)}
		if key.scope == reportsv1alpha1.PolicyScopeNamespaced {
			key.namespace = o.GetNamespace()
		}
		if owner, ok := owners[key]; ok {
			return owner, nil
		}
		owner, err := templatesync.ReportOwner(ctx, r.Local, r.ClusterName, key.scope, key.namespace, key.name)
		owners[key] = owner
		return owner, err
	}
	z := newSummarizer(r.Limits)
	add := func(o client.Object, summary openreportsv1alpha1.ReportSummary, results []openreportsv1alpha1.ReportResult) error {
		owner, err := ownerOf(o)
		if owner != "" {
			z.add(Part{Replicated: owner, Summary: summary, Results: results})
		}
		return err
	}
	mine := client.MatchingLabels{aggregate.LabelAggregatedBy: aggregate.AggregatorName}
	for cont := ""; ; {
		var list openreportsv1alpha1.ReportList
		if err := reader.List(ctx, &list, mine, client.Limit(listPage), client.Continue(cont)); err != nil {
			return nil, fmt.Errorf("list aggregated reports: %w", err)
		}
		for i := range list.Items {
			if err := add(&list.Items[i], list.Items[i].Summary, list.Items[i].Results); err != nil {
				return nil, err
			}
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	for cont := ""; ; {
		var list openreportsv1alpha1.ClusterReportList
		if err := reader.List(ctx, &list, mine, client.Limit(listPage), client.Continue(cont)); err != nil {
			return nil, fmt.Errorf("list aggregated cluster reports: %w", err)
		}
		for i := range list.Items {
			if err := add(&list.Items[i], list.Items[i].Summary, list.Items[i].Results); err != nil {
				return nil, err
			}
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	return z.summaries(), nil
}

// write creates the summary, or updates cur when its serialised content differs: an unchanged
// summary costs the hub no request.
func (r *Rollup) write(ctx context.Context, s Summary, owner types.UID, cur *openreportsv1alpha1.Report) error {
	obj := &openreportsv1alpha1.Report{}
	if cur != nil {
		obj = cur.DeepCopy()
	}
	obj.Name, obj.Namespace = s.Replicated, r.ClusterName
	r.fill(obj, s, owner)
	if cur == nil {
		if err := r.HubWriter.Create(ctx, obj); err != nil {
			return fmt.Errorf("create rolled-up report %s/%s: %w", r.ClusterName, s.Replicated, err)
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
	if err := r.HubWriter.Update(ctx, obj); err != nil {
		return fmt.Errorf("update rolled-up report %s/%s: %w", r.ClusterName, s.Replicated, err)
	}
	writes.WithLabelValues("update").Inc()
	return nil
}

// fill sets the roll-up's fields, leaving what others added (labels, annotations) as it is. The
// summary is owned by its replicated Policy, so the hub's garbage collector removes it with the
// replica even when the cluster is gone for good.
func (r *Rollup) fill(obj *openreportsv1alpha1.Report, s Summary, owner types.UID) {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelRolledUpBy] = RollupName
	labels[LabelRootPolicy] = reportsv1alpha1.LabelSafe(s.Replicated)
	labels[LabelCluster] = reportsv1alpha1.LabelSafe(r.ClusterName)
	obj.SetLabels(labels)
	gvk := policyv1.GroupVersion.WithKind("Policy")
	obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: s.Replicated, UID: owner}})
	obj.Source = aggregate.ReportSource
	obj.Scope = &corev1.ObjectReference{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Namespace: r.ClusterName, Name: s.Replicated}
	limits := r.Limits.withDefaults()
	obj.Configuration = &openreportsv1alpha1.ReportConfiguration{Limits: openreportsv1alpha1.Limits{
		MaxResults: limits.MaxResults, StatusFilter: []openreportsv1alpha1.StatusFilter{"fail", "error", "warn"}}}
	obj.Summary = s.Counts
	obj.Results = s.Worst
}
