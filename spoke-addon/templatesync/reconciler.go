package templatesync

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/spoke-addon/specsync"
)

// cleanupFinalizer is set on policies with cluster-scoped templates: those cannot be owned by
// the namespaced policy, so the reconciler deletes them itself.
const cleanupFinalizer = "regent.dev/template-cleanup"

// rootPolicyLabel names the root policy of a replica as <namespace>.<name>.
const rootPolicyLabel = "policy.open-cluster-management.io/root-policy"

// unknownKindRetry is how soon a template of a kind the cluster does not serve is retried: a
// CRD may be installed at any time and there is no object to watch until then.
const unknownKindRetry = 30 * time.Second

// Reconciler applies the templates of the policies in one cluster namespace.
type Reconciler struct {
	Client           client.Client
	Mapper           meta.RESTMapper
	Recorder         record.EventRecorder
	ClusterNamespace string
	Clock            clock.PassiveClock
	// Reports reads the aggregated policy reports whose failures make a serving admission
	// policy NonCompliant: uncached (the manager's API reader) when nil at setup.
	Reports client.Reader

	watches *watches
}

// templateResult is what became of one template in a reconcile.
type templateResult struct {
	name    string
	state   policyv1.ComplianceState
	message string
	current bool // the state answers the template's current spec
	// rival is another policy of the namespace that owns the template's object, so this one's
	// was refused; it is told too.
	rival string
}

// Reconcile applies or withholds each template of the policy and records the outcome.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := &policyv1.Policy{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		if apierrors.IsNotFound(err) {
			r.watches.track(req.NamespacedName, nil)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !p.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, r.finalize(ctx, p)
	}
	var cycle []string
	// A cycle through p leaves p by one of its own dependencies; finding one reads (and parses the
	// templates of) every policy of the namespace, which for every policy made a namespace's
	// reconciles quadratic: only a policy with dependencies looks, and without copying them all.
	if hasDependencies(p) {
		all := &policyv1.PolicyList{}
		if err := r.Client.List(ctx, all, client.InNamespace(p.Namespace), client.UnsafeDisableDeepCopy); err != nil {
			return reconcile.Result{}, err
		}
		cycle = findCycle(p.Name, policyEdges(all.Items))
	}

	var results []templateResult
	var allDeps []depKey
	desired := map[string]bool{}
	clusterScoped := false
	retry := time.Duration(0)
	for _, tmpl := range p.Spec.PolicyTemplates {
		if tmpl == nil {
			continue
		}
		res, deps, obj, err := r.applyTemplate(ctx, p, tmpl, cycle)
		if err != nil {
			return reconcile.Result{}, err
		}
		allDeps = append(allDeps, deps...)
		if obj != nil {
			desired[objectID(obj)] = true
			clusterScoped = clusterScoped || obj.GetNamespace() == ""
		}
		if res.state == policyv1.NonCompliant && strings.Contains(res.message, "not served by this cluster") {
			retry = unknownKindRetry
		}
		results = append(results, res)
	}
	r.watches.track(req.NamespacedName, allDeps)
	if err := r.removeStale(ctx, p, desired); err != nil {
		return reconcile.Result{}, err
	}
	if clusterScoped && controllerutil.AddFinalizer(p, cleanupFinalizer) {
		if err := r.Client.Update(ctx, p); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{RequeueAfter: retry}, r.writeStatus(ctx, p, results)
}

// applyTemplate creates, updates or (when its dependencies do not hold) deletes one template.
func (r *Reconciler) applyTemplate(ctx context.Context, p *policyv1.Policy, tmpl *policyv1.PolicyTemplate, cycle []string) (templateResult, []depKey, *unstructured.Unstructured, error) {
	res := templateResult{current: true}
	probe := &unstructured.Unstructured{}
	if err := probe.UnmarshalJSON(tmpl.ObjectDefinition.Raw); err != nil {
		res.state, res.message = policyv1.NonCompliant, "template-error; invalid objectDefinition: "+err.Error()
		return res, nil, nil, nil
	}
	res.name = probe.GetName()
	gvk := probe.GroupVersionKind()
	mapping, err := r.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		res.state = policyv1.NonCompliant
		res.message = fmt.Sprintf("template-error; %s %s is not served by this cluster: install its CRD (%v)", gvk.Kind, gvk.GroupVersion(), err)
		return res, nil, nil, nil
	}
	obj, err := templateObject(p, tmpl, mapping.Scope.Name() == meta.RESTScopeNameNamespace)
	if err != nil {
		res.state, res.message = policyv1.NonCompliant, "template-error; "+err.Error()
		return res, nil, nil, nil
	}
	if err := r.watches.ensure(gvk); err != nil {
		return res, nil, nil, fmt.Errorf("watch %s: %w", gvk, err)
	}

	deps, reasons := r.checkDependencies(ctx, p, append(append([]policyv1.PolicyDependency{}, p.Spec.Dependencies...), tmpl.ExtraDependencies...))
	if len(deps) > 0 && cycle != nil {
		reasons = append([]string{cycleMessage(cycle)}, reasons...)
	}

	current, err := r.get(ctx, gvk, client.ObjectKeyFromObject(obj))
	if err != nil && !apierrors.IsNotFound(err) {
		return res, deps, obj, fmt.Errorf("read template %s: %w", obj.GetName(), err)
	}
	exists := err == nil
	if exists {
		if owner, rival := templateOwner(current, p); owner != "" {
			// Never update or delete another's object; look again when it changes or goes.
			res.state, res.message, res.rival = policyv1.NonCompliant, collisionMessage(obj, owner), rival
			return res, append(deps, depKey{GVK: gvk, Namespace: obj.GetNamespace(), Name: obj.GetName()}), nil, nil
		}
	}
	if len(reasons) > 0 {
		if exists {
			// Conditioned on the UID whose owner was checked: a recreated object is not deleted.
			uid := current.GetUID()
			if err := r.Client.Delete(ctx, current, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
				return res, deps, nil, fmt.Errorf("withdraw template %s: %w", obj.GetName(), err)
			}
		}
		res.state, res.message = policyv1.Pending, pendingMessage(reasons)
		if tmpl.IgnorePending {
			res.state, res.message = policyv1.Compliant, "ignorePending: reported Compliant while pending; "+res.message
		}
		return res, deps, nil, nil
	}

	if !exists {
		if err := r.Client.Create(ctx, obj); err != nil {
			res.state, res.message = policyv1.NonCompliant, "template-error; create failed: "+err.Error()
			return res, deps, obj, nil
		}
		res.current = false
		return res, deps, obj, nil
	}
	if needsUpdate(current, obj) {
		// The update carries the resourceVersion of the copy whose owner was checked: if the
		// object changed hands in between, it conflicts and is looked at again.
		obj.SetResourceVersion(current.GetResourceVersion())
		if err := r.Client.Update(ctx, obj); err != nil {
			if apierrors.IsConflict(err) {
				return res, deps, obj, err
			}
			res.state, res.message = policyv1.NonCompliant, "template-error; update failed: "+err.Error()
			return res, deps, obj, nil
		}
		current = obj
		res.current = false
	}
	res.state, _ = complianceOf(current)
	res.message = statusMessage(current, res.state)
	if msg, ok := customMessage(ctx, r.Client, current); ok {
		res.message = msg
	}
	if res.state, res.message, err = r.withViolations(ctx, current, res.state, res.message); err != nil {
		return res, deps, obj, err
	}
	res.current = res.current && evaluatedCurrent(current)
	return res, deps, obj, nil
}

// checkDependencies resolves each dependency, starts watching its kind, and says which do not hold.
func (r *Reconciler) checkDependencies(ctx context.Context, p *policyv1.Policy, deps []policyv1.PolicyDependency) ([]depKey, []string) {
	var keys []depKey
	var reasons []string
	for _, dep := range deps {
		key, err := resolve(dep, rootNamespace(p), p.Namespace, r.namespaced)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("%s %s: %v", dep.Kind, dep.Name, err))
			continue
		}
		keys = append(keys, key)
		if err := r.watches.ensure(key.GVK); err != nil {
			reasons = append(reasons, fmt.Sprintf("%s: cannot watch: %v", key, err))
			continue
		}
		obj, err := r.get(ctx, key.GVK, types.NamespacedName{Namespace: key.Namespace, Name: key.Name})
		if err != nil {
			if !apierrors.IsNotFound(err) {
				reasons = append(reasons, fmt.Sprintf("%s: %v", key, err))
				continue
			}
			obj = nil
		}
		if why := unmet(key, dep.Compliance, obj); why != "" {
			reasons = append(reasons, why)
		}
	}
	return keys, reasons
}

func (r *Reconciler) namespaced(gvk schema.GroupVersionKind) (bool, error) {
	m, err := r.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, fmt.Errorf("%s is not served by this cluster", gvk.Kind)
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// removeStale deletes template objects of this policy that its spec no longer lists.
func (r *Reconciler) removeStale(ctx context.Context, p *policyv1.Policy, desired map[string]bool) error {
	for _, gvk := range r.watches.watchedKinds() {
		items, err := r.list(ctx, gvk, client.MatchingLabels{PolicyLabel: p.Name, ClusterNamespaceLabel: p.Namespace})
		if err != nil {
			continue // a kind whose CRD went away has nothing left to delete
		}
		for _, obj := range items {
			if desired[objectID(obj)] {
				continue
			}
			if err := r.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete stale template %s: %w", obj.GetName(), err)
			}
		}
	}
	return nil
}

// finalize deletes cluster-scoped templates, which garbage collection cannot reach.
func (r *Reconciler) finalize(ctx context.Context, p *policyv1.Policy) error {
	if !controllerutil.ContainsFinalizer(p, cleanupFinalizer) {
		return nil
	}
	if err := r.removeStale(ctx, p, nil); err != nil {
		return err
	}
	controllerutil.RemoveFinalizer(p, cleanupFinalizer)
	return r.Client.Update(ctx, p)
}

// writeStatus records per-template compliance, the aggregate and the hub generation evaluated,
// writing only when something changed.
func (r *Reconciler) writeStatus(ctx context.Context, p *policyv1.Policy, results []templateResult) error {
	prev := map[string]*policyv1.DetailsPerTemplate{}
	for _, d := range p.Status.Details {
		if d != nil {
			prev[d.TemplateMeta.Name] = d
		}
	}
	now := metav1.NewTime(r.Clock.Now())
	status := p.Status.DeepCopy()
	status.Details = nil
	states := make([]policyv1.ComplianceState, 0, len(results))
	allCurrent := true
	for _, res := range results {
		d, changed := withTransition(prev[res.name], res.name, res.state, res.message, p.Name+"."+res.name, now)
		if changed && res.state != "" {
			eventType := corev1.EventTypeNormal
			if res.state != policyv1.Compliant {
				eventType = corev1.EventTypeWarning
			}
			// OCM's event reason, so tools that read OCM's template events read ours.
			r.Recorder.Event(p, eventType, "policy: "+p.Namespace+"/"+res.name, res.message)
			if res.rival != "" {
				r.tellRival(ctx, p, res)
			}
		}
		status.Details = append(status.Details, d)
		states = append(states, res.state)
		allCurrent = allCurrent && res.current
	}
	status.ComplianceState = aggregate(states)
	if allCurrent {
		if g, err := hubGeneration(p); err == nil {
			status.LastEvaluatedGeneration = g
		}
	}
	if equality.Semantic.DeepEqual(&p.Status, status) || nothingToTell(&p.Status, status) {
		return nil
	}
	p.Status = *status
	if err := r.Client.Status().Update(ctx, p); err != nil {
		return fmt.Errorf("write status of %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// nothingToTell says whether next only names templates none of which has reported a compliance
// yet, on a policy whose status is still empty: what status sync would carry to the hub is
// unchanged, and writing it cost a write per policy on creation (500 of ~1,700 Policy status
// writes at a namespace's first convergence, docs/benchmarks.md session 9).
func nothingToTell(prev, next *policyv1.PolicyStatus) bool {
	if prev.ComplianceState != "" || len(prev.Details) > 0 || next.ComplianceState != "" || next.LastEvaluatedGeneration != prev.LastEvaluatedGeneration {
		return false
	}
	for _, d := range next.Details {
		if d.ComplianceState != "" || len(d.History) > 0 {
			return false
		}
	}
	return true
}

// tellRival records on the policy that keeps a contested template that p ships one of the same
// name and was refused, so both teams see the collision. It is said once per change of p's state.
func (r *Reconciler) tellRival(ctx context.Context, p *policyv1.Policy, res templateResult) {
	rival := &policyv1.Policy{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: res.rival}, rival); err != nil {
		return // gone: the refused policy takes the template on its next reconcile
	}
	r.Recorder.Event(rival, corev1.EventTypeWarning, "policy: "+p.Namespace+"/"+res.name,
		fmt.Sprintf("template-error; Template name must be unique. Policy %s also ships a template named %s; this policy keeps it and %s's is refused",
			p.Name, res.name, p.Name))
}

func hubGeneration(p *policyv1.Policy) (int64, error) {
	var g int64
	v, ok := p.Annotations[specsync.HubGenerationAnnotation]
	if !ok {
		return p.Generation, nil // a policy created on the cluster itself answers for its own spec
	}
	_, err := fmt.Sscan(v, &g)
	return g, err
}

// rootNamespace is the hub namespace of a replica's root policy.
func rootNamespace(p *policyv1.Policy) string {
	root := p.Labels[rootPolicyLabel]
	if root == "" {
		root = p.Name
	}
	if ns, _, ok := strings.Cut(root, "."); ok {
		return ns
	}
	return p.Namespace
}

func objectID(o *unstructured.Unstructured) string {
	return o.GroupVersionKind().GroupKind().String() + "/" + o.GetNamespace() + "/" + o.GetName()
}

// hasDependencies says whether p or one of its templates names a dependency.
func hasDependencies(p *policyv1.Policy) bool {
	if len(p.Spec.Dependencies) > 0 {
		return true
	}
	for _, t := range p.Spec.PolicyTemplates {
		if t != nil && len(t.ExtraDependencies) > 0 {
			return true
		}
	}
	return false
}

// policyEdges maps each policy to the policies it depends on: directly (kind Policy) or through
// an object another policy's template creates.
func policyEdges(policies []policyv1.Policy) map[string][]string {
	owner := map[string]string{} // Kind/name of a template object → policy
	for i := range policies {
		for _, t := range policies[i].Spec.PolicyTemplates {
			if t == nil {
				continue
			}
			u := &unstructured.Unstructured{}
			if u.UnmarshalJSON(t.ObjectDefinition.Raw) == nil {
				owner[u.GetKind()+"/"+u.GetName()] = policies[i].Name
			}
		}
	}
	edges := map[string][]string{}
	for i := range policies {
		p := &policies[i]
		deps := append([]policyv1.PolicyDependency{}, p.Spec.Dependencies...)
		for _, t := range p.Spec.PolicyTemplates {
			if t != nil {
				deps = append(deps, t.ExtraDependencies...)
			}
		}
		for _, d := range deps {
			if d.Kind == "Policy" {
				ns := d.Namespace
				if ns == "" {
					ns = rootNamespace(p)
				}
				edges[p.Name] = append(edges[p.Name], ns+"."+d.Name)
			} else if o, ok := owner[d.Kind+"/"+d.Name]; ok && o != p.Name {
				edges[p.Name] = append(edges[p.Name], o)
			}
		}
	}
	return edges
}

// SetupWithManager builds the controller; template and dependency kinds are watched as policies
// name them.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Mapper == nil {
		r.Mapper = mgr.GetRESTMapper()
	}
	if r.Reports == nil {
		r.Reports = mgr.GetAPIReader()
	}
	r.watches = newWatches(mgr.GetCache(), mgr.GetScheme())
	inNamespace := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == r.ClusterNamespace })
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("templatesync").
		For(&policyv1.Policy{}, builder.WithPredicates(inNamespace, predicate.GenerationChangedPredicate{})).
		WatchesMetadata(reportMetadata("Report"), handler.EnqueueRequestsFromMapFunc(r.reportToPolicy), builder.WithPredicates(aggregatedReport)).
		WatchesMetadata(reportMetadata("ClusterReport"), handler.EnqueueRequestsFromMapFunc(r.reportToPolicy), builder.WithPredicates(aggregatedReport)).
		Build(r)
	if err != nil {
		return err
	}
	r.watches.ctrl = c
	return errors.Join(r.watches.ensure(policyv1.GroupVersion.WithKind("Policy")))
}
