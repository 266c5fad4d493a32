package admissionpolicy

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// finalizer lets the controller remove a policy's revisions and webhook configurations: they
// live in another namespace or are cluster-scoped, so ownerReferences cannot.
const finalizer = "regent.dev/admission-policy"

// conditionRollback reports a rollback that could not happen.
const conditionRollback = "Rollback"

// defaultKeptRevisions is PolicyServer.spec.keptRevisions' default.
const defaultKeptRevisions = 3

// policyReconciler runs the lifecycle of the policies of one kind.
type policyReconciler struct {
	kind      policyKind
	client    client.Client
	reader    client.Reader // the manager's cache: policies, PolicyServers
	nsReader  client.Reader // the controller namespace's cache: revisions, Leases, Secrets
	apiReader client.Reader // the API itself, where the cache may lag behind
	namespace string
	opts      Options
	clock     clock.PassiveClock
	recorder  events.EventRecorder
}

func (r *policyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.kind.new()
	if err := r.reader.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ref := referenceTo(r.kind, obj)
	if !obj.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, obj, ref)
	}
	// A patch of the finalizers alone: an update would send the spec as the Go types encode it,
	// dropping a user's explicit `mutating: false` and bumping the generation for nothing.
	before := obj.DeepCopyObject().(client.Object)
	if controllerutil.AddFinalizer(obj, finalizer) {
		if err := r.client.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	revs, err := r.revisions(ctx, ref)
	if err != nil {
		return ctrl.Result{}, err
	}
	var extra []metav1.Condition
	if target, ok := obj.GetAnnotations()[kubewardenv1.RollbackAnnotation]; ok {
		done, cond, err := r.rollback(ctx, obj, target, revs)
		if err != nil || done {
			return ctrl.Result{}, err
		}
		extra = append(extra, cond)
	}
	var conflict *ownershipConflict
	if revs, err = r.ensureRevision(ctx, obj, ref, revs); err != nil && !errors.As(err, &conflict) {
		return ctrl.Result{}, err
	}
	return r.reconcileNormal(ctx, obj, ref, revs, extra, conflict)
}

// reconcileNormal decides the serving generation and status from the revisions and Leases, then
// moves the webhook configuration, collects old revisions and writes the status, in that order:
// a revision is only collected once no webhook points at it. conflict, when set, is an object the
// policy needs that another policy owns: nothing moves until it is gone.
func (r *policyReconciler) reconcileNormal(ctx context.Context, obj client.Object, ref kubewardenv1.PolicyReference,
	revs []kubewardenv1.PolicyRevision, extra []metav1.Condition, conflict *ownershipConflict) (ctrl.Result, error) {
	ps := policyServerOf(obj)
	leases := &coordinationv1.LeaseList{}
	if err := r.nsReader.List(ctx, leases, client.InNamespace(r.namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("list replica leases: %w", err)
	}
	now := r.clock.Now()
	live, nextExpiry := liveReplicas(ps, leases.Items, now)
	kept, psMissing, leaderDown, err := r.keptRevisions(ctx, ps)
	if err != nil {
		return ctrl.Result{}, err
	}
	status := statusOf(obj)
	states := make([]revisionState, len(revs))
	for i := range revs {
		states[i] = stateOf(&revs[i])
	}
	o := observed{
		Generation: obj.GetGeneration(), Serving: status.ServingGeneration, Revisions: states,
		Live: live, Kept: kept, PolicyServerMissing: psMissing, Previous: *status, Extra: extra, Now: now,
	}
	if !leaderLeaseHeld(ps, leases.Items, now) {
		// A process that is not the leader workload may lead (a local one, with --role=all):
		// then the workload being down delays nothing.
		o.LeaderUnavailable = leaderDown
	}
	if conflict != nil {
		o.Blocked = ptrTo(conflict.condition(obj.GetGeneration()))
	}
	d := decide(o)
	if d.Serving > 0 && conflict == nil {
		switched, err := r.applyWebhooks(ctx, obj, ref, d.Serving, revs)
		switch {
		case errors.As(err, &conflict):
			// Decide again: the webhook stays where it is, so must the status.
			o.Blocked = ptrTo(conflict.condition(obj.GetGeneration()))
			d = decide(o)
		case apierrors.IsInvalid(err):
			// The apiserver refuses what the generation asks for (a matchConditions expression
			// that does not compile): the previous webhook stays, and the user is told why.
			refused := webhookRefused(d.Serving, obj.GetGeneration(), err)
			o.Blocked = &refused
			d = decide(o)
			if prev := findCondition(status.Conditions, conditionWebhook); prev == nil || prev.Message != refused.Message {
				r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, "WebhookRefused", "Serve", "%s", refused.Message)
			}
		case err != nil:
			return ctrl.Result{}, err
		}
		if switched {
			webhookSwitches.Inc()
			r.recorder.Eventf(obj, nil, corev1.EventTypeNormal, "WebhookSwitched", "Serve",
				"the webhook configuration now calls generation %d on every replica", d.Serving)
		}
		if err := r.labelServing(ctx, revs, d.Serving); err != nil {
			return ctrl.Result{}, err
		}
	}
	if conflict != nil {
		// Every reconcile of a blocked policy comes here; say it once per new answer.
		if prev := findCondition(status.Conditions, conditionConflict); prev == nil || prev.Message != o.Blocked.Message {
			r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, "OwnedByAnotherPolicy", "Serve", "%s", o.Blocked.Message)
		}
	}
	if err := r.collect(ctx, obj, revs, d.Collect); err != nil {
		return ctrl.Result{}, err
	}
	if !equality.Semantic.DeepEqual(*status, d.Status) {
		if d.Status.Phase == kubewardenv1.PhaseFailed && status.Phase != kubewardenv1.PhaseFailed {
			r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, "GenerationFailed", "Serve",
				"generation %d cannot be served (%s); generation %d keeps serving", obj.GetGeneration(),
				failureMessage(d.Status), d.Serving)
		}
		*status = d.Status
		if err := r.client.Status().Update(ctx, obj); err != nil {
			return ctrl.Result{}, fmt.Errorf("write status: %w", err)
		}
		statusWrites.Inc()
	}
	if conflict != nil {
		return ctrl.Result{RequeueAfter: conflictRetry * time.Second}, nil
	}
	if !nextExpiry.IsZero() {
		// An expiring Lease sends no event: look again when the first live one would expire.
		return ctrl.Result{RequeueAfter: nextExpiry.Sub(now) + 100*time.Millisecond}, nil
	}
	return ctrl.Result{}, nil
}

// failureMessage says why the newest generation failed, for the Event: the conflict, the
// leader's Initialized, or the first replica that could not load it.
func failureMessage(st kubewardenv1.PolicyStatus) string {
	for _, c := range st.Conditions {
		if (c.Type == conditionConflict && c.Status == metav1.ConditionTrue) || (c.Type == conditionWebhook && c.Status == metav1.ConditionFalse) {
			return c.Message
		}
		if c.Type == kubewardenv1.ConditionInitialized && c.Status == metav1.ConditionFalse {
			return fmt.Sprintf("leader %s: %s", c.Reason, c.Message)
		}
	}
	for _, rs := range st.Replicas {
		if rs.Ready == metav1.ConditionFalse {
			return fmt.Sprintf("replica %d %s: %s", rs.Replica, rs.Reason, rs.Message)
		}
	}
	return "unknown"
}

// revisions lists the policy's revisions; ones of an earlier policy of the same name are not its.
func (r *policyReconciler) revisions(ctx context.Context, ref kubewardenv1.PolicyReference) ([]kubewardenv1.PolicyRevision, error) {
	var all []kubewardenv1.PolicyRevision
	for _, label := range policyLabelValues(ref) {
		list := &kubewardenv1.PolicyRevisionList{}
		if err := r.nsReader.List(ctx, list, client.InNamespace(r.namespace), client.MatchingLabels{PolicyLabel: label}); err != nil {
			return nil, fmt.Errorf("list revisions: %w", err)
		}
		all = append(all, list.Items...)
	}
	var out []kubewardenv1.PolicyRevision
	for _, rev := range all {
		if rev.Spec.ObjectReference.Kind == ref.Kind && rev.Spec.ObjectReference.UID == ref.UID {
			out = append(out, rev)
		}
	}
	return out, nil
}

// ensureRevision creates the revision of the policy's generation if it is missing and marks the
// newest revision Scheduled, the only condition the controller writes on revisions.
func (r *policyReconciler) ensureRevision(ctx context.Context, obj client.Object, ref kubewardenv1.PolicyReference,
	revs []kubewardenv1.PolicyRevision) ([]kubewardenv1.PolicyRevision, error) {
	gen := obj.GetGeneration()
	var rev *kubewardenv1.PolicyRevision
	for i := range revs {
		if revs[i].Spec.PolicyGeneration == gen {
			rev = &revs[i]
		}
	}
	if rev == nil {
		data, err := revisionData(obj)
		if err != nil {
			return nil, fmt.Errorf("encode spec: %w", err)
		}
		rev = &kubewardenv1.PolicyRevision{
			ObjectMeta: metav1.ObjectMeta{
				Name: ref.RevisionName(gen), Namespace: r.namespace,
				Labels: map[string]string{kubewardenv1.PolicyServerLabel: policyServerOf(obj), PolicyLabel: ref.LabelValue()},
			},
			Spec: kubewardenv1.PolicyRevisionSpec{ObjectReference: ref, PolicyGeneration: gen, Enabled: true,
				Data: runtime.RawExtension{Raw: data}},
		}
		if err := r.client.Create(ctx, rev); err != nil {
			if apierrors.IsAlreadyExists(err) {
				existing := &kubewardenv1.PolicyRevision{}
				if r.nsReader.Get(ctx, client.ObjectKeyFromObject(rev), existing) == nil {
					if conflict := revisionOwner(existing, ref); conflict != nil {
						return revs, conflict
					}
				}
				// Created by an earlier pass the cache has not shown yet, or left by an earlier
				// policy of the same name, which its finalizer is removing: look again.
				return nil, fmt.Errorf("revision %s exists but is not yet seen as this policy's: %w", rev.Name, err)
			}
			return nil, fmt.Errorf("create revision %s: %w", rev.Name, err)
		}
		revisionsCreated.Inc()
		r.recorder.Eventf(obj, nil, corev1.EventTypeNormal, "RevisionCreated", "Schedule",
			"PolicyRevision %s/%s holds generation %d", r.namespace, rev.Name, gen)
		revs = append(revs, *rev)
		rev = &revs[len(revs)-1]
	}
	if !hasRevisionCondition(rev.Status.Conditions, kubewardenv1.ConditionScheduled) {
		rev.Status.Conditions = append(rev.Status.Conditions, kubewardenv1.PolicyCondition{
			Type: kubewardenv1.ConditionScheduled, Status: metav1.ConditionTrue, Reason: "RevisionCreated",
			Message:            fmt.Sprintf("generation %d is waiting for the policy server", gen),
			LastTransitionTime: metav1.NewTime(r.clock.Now().Truncate(time.Second)), PolicyGeneration: gen,
		})
		// An update carrying the resourceVersion: a concurrent write by the policy server
		// conflicts and is read again rather than overwritten.
		if err := r.client.Status().Update(ctx, rev); err != nil {
			return nil, fmt.Errorf("mark revision %s scheduled: %w", rev.Name, err)
		}
	}
	return revs, nil
}

// keptRevisions is the PolicyServer's kept count, the default while the PolicyServer is missing,
// whether it is missing or being deleted, and why its leader workload is unavailable, if it is.
func (r *policyReconciler) keptRevisions(ctx context.Context, ps string) (int, bool, string, error) {
	server := &kubewardenv1.PolicyServer{}
	err := r.reader.Get(ctx, client.ObjectKey{Name: ps}, server)
	if apierrors.IsNotFound(err) {
		return defaultKeptRevisions, true, "", nil
	}
	if err != nil {
		return 0, false, "", fmt.Errorf("read PolicyServer %s: %w", ps, err)
	}
	missing := !server.DeletionTimestamp.IsZero()
	var leaderDown string
	if c := meta.FindStatusCondition(server.Status.Conditions, conditionLeaderReady); c != nil && c.Status == metav1.ConditionFalse {
		leaderDown = c.Message
	}
	if server.Spec.KeptRevisions < 1 {
		return defaultKeptRevisions, missing, leaderDown, nil
	}
	return int(server.Spec.KeptRevisions), missing, leaderDown, nil
}

func hasRevisionCondition(conds []kubewardenv1.PolicyCondition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return true
		}
	}
	return false
}

// collect disables, then deletes, the revisions beyond the kept count; disabling first tells the
// policy server to unload them and drop their cache entries even if the delete is slow.
func (r *policyReconciler) collect(ctx context.Context, obj client.Object, revs []kubewardenv1.PolicyRevision, names []string) error {
	if len(names) == 0 {
		return nil
	}
	byName := map[string]*kubewardenv1.PolicyRevision{}
	for i := range revs {
		byName[revs[i].Name] = &revs[i]
	}
	for _, name := range names {
		rev := byName[name]
		if rev.Spec.Enabled {
			rev.Spec.Enabled = false
			if err := r.client.Update(ctx, rev); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("disable revision %s: %w", name, err)
			}
		}
		if err := r.client.Delete(ctx, rev); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete revision %s: %w", name, err)
		}
		revisionsDeleted.Inc()
	}
	r.recorder.Eventf(obj, nil, corev1.EventTypeNormal, "RevisionsCollected", "Collect",
		"deleted %d revisions beyond the kept count: %v", len(names), names)
	return nil
}

// reconcileDelete removes what the policy's finalizer guards, then lets the policy go.
func (r *policyReconciler) reconcileDelete(ctx context.Context, obj client.Object, ref kubewardenv1.PolicyReference) error {
	if !controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	left, err := r.deleteWebhooks(ctx, ref)
	if err != nil {
		return err
	}
	for _, c := range left {
		r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, "OwnedByAnotherPolicy", "Delete", "%s", c.Error())
	}
	if err := r.deleteRevisions(ctx, ref); err != nil {
		return err
	}
	before := obj.DeepCopyObject().(client.Object)
	controllerutil.RemoveFinalizer(obj, finalizer)
	if err := r.client.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	return nil
}

// deleteRevisions deletes the revisions recorded for ref's policy (and those an earlier policy of
// its name left), never another policy's. They are listed from the API, not the cache, so a
// revision created just before the policy was deleted is not left behind; each delete is
// conditioned on the UID of the revision whose owner was checked.
func (r *policyReconciler) deleteRevisions(ctx context.Context, ref kubewardenv1.PolicyReference) error {
	var all []kubewardenv1.PolicyRevision
	for _, label := range policyLabelValues(ref) {
		list := &kubewardenv1.PolicyRevisionList{}
		if err := r.apiReader.List(ctx, list, client.InNamespace(r.namespace), client.MatchingLabels{PolicyLabel: label}); err != nil {
			return fmt.Errorf("list revisions: %w", err)
		}
		all = append(all, list.Items...)
	}
	for i := range all {
		rev := &all[i]
		if revisionOwner(rev, ref) != nil {
			continue
		}
		if err := r.client.Delete(ctx, rev, client.Preconditions{UID: &rev.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete revision %s: %w", rev.Name, err)
		}
	}
	return nil
}
