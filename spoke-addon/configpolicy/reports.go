package configpolicy

import (
	"context"
	"fmt"
	"strings"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	policyv1 "regent.dev/regent/api/policy/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/reports"
)

// reportsControllerName names the controller that feeds ConfigurationPolicy results into the
// per-resource reports.
const reportsControllerName = "configuration-policy-reports"

// policyKeysIndex indexes per-resource reports by their policy label keys, so the reports of one
// policy are found without scanning every report of the cluster.
const policyKeysIndex = "regent.dev/configpolicy-report-keys"

// reportFeed writes each ConfigurationPolicy's per-object results into the evaluated objects'
// ResourceReports, so one view (the aggregated openreports Reports) covers admission and
// configuration policies. It reads the policy's status (relatedObjects), never the evaluation:
// it is its own controller with its own queue, so evaluation never waits for a report write,
// bursts of status changes of one policy coalesce, and it feeds reports for an external
// ConfigurationPolicy controller (OCM's) just as well. Writes are batched per resource
// (reportBatch): an object many policies evaluate gets one report write for all of them.
//
// A ConfigurationPolicy is reported cluster-wide (`cpol-<name>`): it lives in the cluster
// namespace, a control namespace, and evaluates objects in whatever namespaces its
// namespaceSelector picks; its results belong in each object's namespace the way a Kyverno
// ClusterPolicy's do. Two ConfigurationPolicies of one name in different namespaces would share
// a report key: OCM places them all in the cluster namespace, where names are unique.
type reportFeed struct {
	client client.Client
	batch  *reportBatch
}

// SetupReportFeed adds the report feed to mgr.
func SetupReportFeed(mgr ctrl.Manager) error {
	// Reports are written through a client that reads from the apiserver: the feed keeps only
	// the reports' metadata (an index of their policy keys), never their results, as the
	// aggregator does not either.
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient()})
	if err != nil {
		return fmt.Errorf("report feed client: %w", err)
	}
	f := &reportFeed{client: mgr.GetClient(), batch: newReportBatch(direct, 2, defaultBatchDelay)}
	if err := mgr.Add(f.batch); err != nil {
		return err
	}
	keys := func(o client.Object) []string {
		var out []string
		for k := range o.GetLabels() {
			if strings.HasPrefix(k, reportsv1alpha1.ClusterPolicyLabelPrefix) {
				out = append(out, k)
			}
		}
		return out
	}
	ctx := context.Background()
	for _, kind := range []string{"ResourceReport", "ClusterResourceReport"} {
		if err := mgr.GetFieldIndexer().IndexField(ctx, reportMetadata(kind), policyKeysIndex, keys); err != nil {
			return fmt.Errorf("index %ss by policy: %w", kind, err)
		}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(reportsControllerName).
		// Every status write is an evaluation whose outcome changed; the controller writes no
		// status when nothing did, so this sees only changes.
		For(&policyv1.ConfigurationPolicy{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Complete(f)
}

// Reconcile makes the reports hold the policy's results as of its last evaluation and drops them
// from objects it no longer covers; a deleted policy's results are dropped everywhere.
func (f *reportFeed) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	policy := reports.PolicyRef{Scope: reportsv1alpha1.PolicyScopeCluster, Name: req.Name}
	p := &policyv1.ConfigurationPolicy{}
	err := f.client.Get(ctx, req.NamespacedName, p)
	switch {
	case client.IgnoreNotFound(err) != nil:
		return ctrl.Result{}, fmt.Errorf("get ConfigurationPolicy %s: %w", req, err)
	case err != nil || !p.DeletionTimestamp.IsZero():
		return ctrl.Result{}, f.sync(ctx, policy, "", nil)
	}
	// Until the current generation is evaluated, the reports keep the last evaluation's results.
	evaluated := p.Status.LastEvaluatedGeneration
	if evaluated == 0 || evaluated != p.Generation {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, f.sync(ctx, policy, fmt.Sprint(evaluated), objectResults(p))
}

// sync hands the batch writer results (by object UID) at version and the policy's drop from every
// other report.
func (f *reportFeed) sync(ctx context.Context, policy reports.PolicyRef, version string, results map[types.UID]objectReport) error {
	key, _ := reportsv1alpha1.PolicyLabelKey(policy.Scope, policy.Name)
	// A report is named by its resource's UID.
	stale := map[types.UID]reports.Resource{}
	for _, kind := range []string{"ResourceReportList", "ClusterResourceReportList"} {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(reportsv1alpha1.GroupVersion.WithKind(kind))
		if err := f.client.List(ctx, list, client.MatchingFields{policyKeysIndex: key}); err != nil {
			return fmt.Errorf("list %s of %s: %w", kind, policy.Name, err)
		}
		for i := range list.Items {
			stale[types.UID(list.Items[i].Name)] = resourceOf(&list.Items[i])
		}
	}
	for uid, res := range f.batch.pendingFor(policy) {
		stale[uid] = res
	}
	for uid, r := range results {
		delete(stale, uid)
		f.batch.set(r.resource, policy, &reports.PolicyResults{Policy: policy, Version: version, Results: r.results})
	}
	for _, res := range stale {
		f.batch.set(res, policy, nil)
	}
	return nil
}

// resourceOf is the resource a report is about, from its ownerReference.
func resourceOf(r client.Object) reports.Resource {
	res := reports.Resource{Namespace: r.GetNamespace(), UID: types.UID(r.GetName())}
	if refs := r.GetOwnerReferences(); len(refs) == 1 {
		res.APIVersion, res.Kind, res.Name = refs[0].APIVersion, refs[0].Kind, refs[0].Name
	}
	return res
}

type objectReport struct {
	resource reports.Resource
	results  []openreportsv1alpha1.ReportResult
}

// objectResults are the policy's results per existing object it evaluated: pass when the object
// complies, fail with the reason otherwise (a mustnothave object that exists fails on that
// object). Objects the policy did not find, or deleted, have no report to carry a result.
func objectResults(p *policyv1.ConfigurationPolicy) map[types.UID]objectReport {
	out := map[types.UID]objectReport{}
	for _, rel := range p.Status.RelatedObjects {
		if rel.Properties == nil || rel.Properties.UID == "" || rel.Reason == deleted.relatedReason() {
			continue
		}
		uid := types.UID(rel.Properties.UID)
		o := rel.Object
		r := openreportsv1alpha1.ReportResult{
			Source:   "ConfigurationPolicy",
			Rule:     "object-templates",
			Result:   "pass",
			Severity: openreportsv1alpha1.ResultSeverity(strings.ToLower(string(p.Spec.Severity))),
			Description: fmt.Sprintf("%s %s: %s", o.Kind, strings.TrimPrefix(o.Metadata.Namespace+"/"+o.Metadata.Name, "/"),
				rel.Reason),
		}
		if rel.Compliant != string(policyv1.Compliant) {
			r.Result = "fail"
		}
		entry := out[uid]
		entry.resource = reports.Resource{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Metadata.Namespace, Name: o.Metadata.Name, UID: uid}
		entry.results = append(entry.results, r)
		out[uid] = entry
	}
	return out
}

func reportMetadata(kind string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(reportsv1alpha1.GroupVersion.WithKind(kind))
	return m
}
