package background

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/policyserver"
	"regent.dev/regent/reports"
)

// producedBy marks the results the scan wrote, so that it drops a policy's results when the
// policy turns backgroundAudit off and leaves what admission recorded for it.
const (
	producedByProperty = "regent.dev/produced-by"
	producedByScan     = "background-scan"
)

// errNotSynced: the namespaces' labels are not listed yet, so no namespace selector can be judged.
var errNotSynced = errors.New("namespaces not listed yet")

// notReadyRetry is when a resource is tried again after its policy was not loaded or the server
// was busy.
const notReadyRetry = 2 * time.Second

func (s *Scanner) processNext(ctx context.Context) bool {
	k, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(k)
	if ctx.Err() != nil {
		return false // stopping: what is left is not drained
	}
	force := s.takeForce(k)
	err := s.process(ctx, k, force)
	switch {
	case err == nil:
		s.queue.Forget(k)
	case ctx.Err() != nil:
	case errors.Is(err, policyserver.ErrNotLoaded) || errors.Is(err, policyserver.ErrBusy) || errors.Is(err, errNotSynced):
		// Not a failure: this replica is loading the generation, or admission holds every
		// slot. Retried at a steady pace rather than backing off for minutes.
		s.restoreForce(k, force)
		s.queue.Forget(k)
		s.queue.AddAfter(k, notReadyRetry)
	default:
		s.log.Error(err, "scan failed; retrying", "namespace", k.namespace, "uid", k.uid)
		s.restoreForce(k, force)
		s.queue.AddRateLimited(k)
	}
	return true
}

// process brings one resource's report up to date: every policy that matches the object and
// whose label is not its serving generation (or that is forced) is evaluated, the results of
// policies that no longer apply are dropped, and the report is written once — or deleted when no
// policy's results are left.
func (s *Scanner) process(ctx context.Context, k key, force forced) error {
	obj, t := s.lookup(k)
	rep := s.reportMeta(ctx, k)
	if obj == nil && rep == nil {
		return nil
	}
	s.metrics.scanned.Inc()
	var have map[string]string
	if rep != nil {
		have = rep.Labels
	}
	want := map[policyID]bool{}
	var set []reports.PolicyResults
	var retry error
	if obj != nil {
		var nsLabels map[string]string
		if t.namespaced {
			var known bool
			if nsLabels, known = s.namespaceLabels(k.namespace); !known {
				return errNotSynced
			}
		}
		var req []byte
		for _, p := range s.matching(t, obj, nsLabels) {
			id := idOf(p.ref, p.namespace)
			want[id] = true
			lk, _ := reportsv1alpha1.PolicyLabelKey(p.ref.Scope, p.ref.Name)
			if v, ok := have[lk]; ok && v == reportsv1alpha1.LabelSafe(p.version()) && !force.has(id) {
				continue
			}
			if req == nil {
				var err error
				if req, err = auditRequest(t, obj); err != nil {
					return err
				}
			}
			resp, outcome, err := s.eval.Audit(ctx, p.server, p.generation, req)
			if err != nil {
				s.metrics.errors.WithLabelValues("evaluate").Inc()
				// The other policies' results are still written; this one is retried.
				retry = fmt.Errorf("evaluate %s with %s: %w", obj.GetName(), p.server, err)
				want[id] = true
				continue
			}
			s.metrics.evaluations.WithLabelValues(outcome).Inc()
			r := resultOf(p.ref.Name, resp, outcome)
			r.Properties = map[string]string{producedByProperty: producedByScan}
			p.class.Stamp(&r)
			set = append(set, reports.PolicyResults{Policy: p.ref, Version: p.version(), Results: []openreportsv1alpha1.ReportResult{r}})
		}
	}
	drop, err := s.drops(ctx, k, rep, want, obj != nil)
	if err != nil {
		return err
	}
	if len(set) == 0 && len(drop) == 0 {
		return retry
	}
	res := resourceOf(k, obj, t, rep)
	if res == nil {
		return retry
	}
	if len(set) == 0 && retry == nil && rep != nil && len(policyLabels(rep.Labels)) == len(drop) {
		return s.deleteReport(ctx, k, rep)
	}
	if rep == nil && len(set) > 0 {
		// No report yet (as far as the informer knows): create it in one request; one that
		// exists after all is updated by Apply.
		err := s.api.Create(ctx, reports.Desired(nil, *res, reportsv1alpha1.SourceBackground, set, nil))
		switch {
		case err == nil:
			s.metrics.writes.WithLabelValues("apply").Inc()
			return retry
		case !apierrors.IsAlreadyExists(err):
			s.metrics.errors.WithLabelValues("write").Inc()
			return fmt.Errorf("create report of %s %s/%s: %w", res.Kind, res.Namespace, res.Name, err)
		}
	}
	changed, err := reports.Apply(ctx, s.api, *res, reportsv1alpha1.SourceBackground, set, drop)
	if err != nil {
		s.metrics.errors.WithLabelValues("write").Inc()
		return err
	}
	if changed {
		s.metrics.writes.WithLabelValues("apply").Inc()
	}
	return retry
}

// lookup finds a watched object by its UID. A kind served in two groups (core and
// events.k8s.io Events) holds the same objects twice; the first in a fixed order wins, so the
// report's kind never flips between scans.
func (s *Scanner) lookup(k key) (*unstructured.Unstructured, resourceType) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, gr := range s.order {
		w := s.types[gr]
		objs, _ := w.informer.GetIndexer().ByIndex(uidIndex, string(k.uid))
		if len(objs) > 0 {
			return objs[0].(*unstructured.Unstructured), w.t
		}
	}
	return nil, resourceType{}
}

func (s *Scanner) reportMeta(ctx context.Context, k key) *metav1.PartialObjectMetadata {
	m := metaOf(resourceReportMeta.GroupVersionKind())
	if k.namespace == "" {
		m = metaOf(clusterReportMeta.GroupVersionKind())
	}
	if err := s.cache.Get(ctx, client.ObjectKey{Namespace: k.namespace, Name: string(k.uid)}, m); err != nil {
		return nil
	}
	return m
}

// namespaceLabels are ns's labels; ok is false while they cannot be known yet (the informer
// has not listed the namespaces), when no selector may be judged.
func (s *Scanner) namespaceLabels(ns string) (labels map[string]string, ok bool) {
	s.mu.Lock()
	w := s.namespaces
	s.mu.Unlock()
	if w == nil {
		return nil, true // no policy has a namespace selector
	}
	if !w.informer.HasSynced() {
		return nil, false
	}
	o, exists, _ := w.informer.GetIndexer().GetByKey(ns)
	if m, ok := o.(*metav1.PartialObjectMetadata); exists && ok {
		return m.Labels, true
	}
	return nil, true
}

// matching are the scanned policies that cover obj, of type t.
func (s *Scanner) matching(t resourceType, obj *unstructured.Unstructured, nsLabels map[string]string) []*policy {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*policy
	for id, p := range s.policies {
		for _, c := range s.covers[id] {
			if c.gvr == t.gvr && p.matches(t, obj.GetNamespace(), obj.GetLabels(), nsLabels) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// drops are the policies whose results the report holds and must lose: a scanned policy that no
// longer matches the object (known only when the object is: a report read before its object's
// informer must not lose anything); a policy of this server whose backgroundAudit is off, for the
// results the scan wrote; a policy that no longer exists, for results of source ResultSource
// (admission's too). A ConfigurationPolicy's results, or another server's policy's, stay.
func (s *Scanner) drops(ctx context.Context, k key, rep *metav1.PartialObjectMetadata, want map[policyID]bool, objectKnown bool) ([]reports.PolicyRef, error) {
	if rep == nil {
		return nil, nil
	}
	var drop, check []reports.PolicyRef
	for lk := range policyLabels(rep.Labels) {
		ref, ok := refOf(lk, rep.Annotations)
		if !ok {
			continue
		}
		id := idOf(ref, k.namespace)
		if want[id] {
			continue
		}
		s.mu.Lock()
		_, active := s.policies[id]
		s.mu.Unlock()
		if active {
			if objectKnown {
				drop = append(drop, ref)
			}
			continue
		}
		spec, exists, err := s.policySpec(ctx, ref, k.namespace)
		if err != nil {
			return nil, err
		}
		switch {
		case !exists:
			check = append(check, ref)
		case spec.PolicyServer == s.opts.PolicyServer && !spec.BackgroundAudit:
			check = append(check, ref)
		}
	}
	if len(check) == 0 {
		return drop, nil
	}
	full := reportOf(k.namespace)
	if err := s.api.Get(ctx, client.ObjectKey{Namespace: k.namespace, Name: string(k.uid)}, full); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	for _, ref := range check {
		_, exists, _ := s.policySpec(ctx, ref, k.namespace)
		if ownedResults(full.ReportSpec().Results, ref, !exists) {
			drop = append(drop, ref)
		}
	}
	return drop, nil
}

// ownedResults tells whether every result of ref is the scan's (or, for a policy that no longer
// exists, any of source ResultSource, which admission writes too).
func ownedResults(results []openreportsv1alpha1.ReportResult, ref reports.PolicyRef, gone bool) bool {
	for i := range results {
		r := &results[i]
		if r.Policy != ref.Name || reports.ScopeOf(r) != ref.Scope {
			continue
		}
		if r.Properties[producedByProperty] == producedByScan || (gone && r.Source == ResultSource) {
			continue
		}
		return false
	}
	return true
}

// policySpec reads the policy a report label names; exists is false when it is gone.
func (s *Scanner) policySpec(ctx context.Context, ref reports.PolicyRef, namespace string) (kubewardenv1.PolicySpec, bool, error) {
	var err error
	var spec kubewardenv1.PolicySpec
	group, isGroup := kubewardenv1.ReportedGroup(ref.Name)
	switch {
	case isGroup && ref.Scope == reportsv1alpha1.PolicyScopeNamespaced:
		var g kubewardenv1.AdmissionPolicyGroup
		err = s.cache.Get(ctx, client.ObjectKey{Namespace: namespace, Name: group}, &g)
		spec = groupAsPolicy(g.Spec)
	case isGroup:
		var g kubewardenv1.ClusterAdmissionPolicyGroup
		err = s.cache.Get(ctx, client.ObjectKey{Name: group}, &g)
		spec = groupAsPolicy(g.Spec)
	case ref.Scope == reportsv1alpha1.PolicyScopeNamespaced:
		var p kubewardenv1.AdmissionPolicy
		err = s.cache.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, &p)
		spec = p.Spec
	default:
		var p kubewardenv1.ClusterAdmissionPolicy
		err = s.cache.Get(ctx, client.ObjectKey{Name: ref.Name}, &p)
		spec = p.Spec.PolicySpec
	}
	if apierrors.IsNotFound(err) {
		return spec, false, nil
	}
	if err != nil {
		return spec, false, fmt.Errorf("read policy %s: %w", ref.Name, err)
	}
	return spec, true, nil
}

// policyAnnotations are the annotations of the policy ref names, nil when it is gone.
func (s *Scanner) policyAnnotations(ctx context.Context, ref kubewardenv1.PolicyReference) (map[string]string, error) {
	obj := ownerObject(ref)
	err := s.cache.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, obj)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read policy %s: %w", ref.Name, err)
	}
	return obj.GetAnnotations(), nil
}

// policyLabels are a report's policy labels.
func policyLabels(l map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range l {
		if strings.HasPrefix(k, reportsv1alpha1.NamespacedPolicyLabelPrefix) || strings.HasPrefix(k, reportsv1alpha1.ClusterPolicyLabelPrefix) {
			out[k] = v
		}
	}
	return out
}

// refOf reads the policy a label key names, from the annotation of the same key when hashed.
func refOf(labelKey string, annotations map[string]string) (reports.PolicyRef, bool) {
	ref := reports.PolicyRef{Scope: reportsv1alpha1.PolicyScopeCluster}
	name, ok := strings.CutPrefix(labelKey, reportsv1alpha1.ClusterPolicyLabelPrefix)
	if !ok {
		ref.Scope = reportsv1alpha1.PolicyScopeNamespaced
		name = strings.TrimPrefix(labelKey, reportsv1alpha1.NamespacedPolicyLabelPrefix)
	}
	if strings.HasPrefix(name, "h-") {
		if name, ok = annotations[labelKey]; !ok {
			return ref, false
		}
	}
	ref.Name = name
	return ref, true
}

func reportOf(namespace string) reportsv1alpha1.Object {
	if namespace == "" {
		return &reportsv1alpha1.ClusterResourceReport{}
	}
	return &reportsv1alpha1.ResourceReport{}
}

// resourceOf is what the report names: the object, or when it is not watched any more the
// report's owner.
func resourceOf(k key, obj *unstructured.Unstructured, t resourceType, rep *metav1.PartialObjectMetadata) *reports.Resource {
	if obj != nil {
		return &reports.Resource{APIVersion: t.gvr.GroupVersion().String(), Kind: t.kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()}
	}
	for _, o := range rep.OwnerReferences {
		if o.UID == k.uid {
			return &reports.Resource{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: k.namespace, Name: o.Name, UID: o.UID}
		}
	}
	return nil
}

// deleteReport removes a report left with no policy's results, only if unchanged since read.
func (s *Scanner) deleteReport(ctx context.Context, k key, rep *metav1.PartialObjectMetadata) error {
	obj := reportOf(k.namespace)
	obj.SetNamespace(k.namespace)
	obj.SetName(string(k.uid))
	uid, rv := rep.UID, rep.ResourceVersion
	err := s.api.Delete(ctx, obj, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("report %s/%s changed while being deleted: %w", k.namespace, k.uid, err)
	case err != nil:
		s.metrics.errors.WithLabelValues("write").Inc()
		return fmt.Errorf("delete report %s/%s: %w", k.namespace, k.uid, err)
	}
	s.metrics.writes.WithLabelValues("delete").Inc()
	return nil
}
