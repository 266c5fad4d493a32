package configpolicy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/spoke-addon/compliancemessage"
)

// Reconciler evaluates ConfigurationPolicies. Build it with SetupWithManager.
type Reconciler struct {
	client   client.Client
	eval     *evaluator
	index    *watchIndex
	caches   *objectCaches
	recorder events.EventRecorder
	clock    clock.PassiveClock
	observe  func(policy types.NamespacedName, statusWritten bool)
}

// Reconcile evaluates one policy and writes its status when the result differs from the last.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &policyv1.ConfigurationPolicy{}
	if err := r.client.Get(ctx, req.NamespacedName, p); err != nil {
		if apierrors.IsNotFound(err) {
			r.index.remove(req.NamespacedName)
			r.caches.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get ConfigurationPolicy %s: %w", req, err)
	}
	if !p.DeletionTimestamp.IsZero() {
		// Deleted, or withdrawn by template sync when a dependency stopped holding: prune.
		if err := r.finalize(ctx, p); err != nil {
			if apierrors.IsConflict(err) {
				return ctrl.Result{RequeueAfter: retryAfterConflict}, nil
			}
			return ctrl.Result{}, fmt.Errorf("finalize ConfigurationPolicy %s: %w", req, err)
		}
		return ctrl.Result{}, nil
	}
	if err := r.syncFinalizer(ctx, p); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: retryAfterConflict}, nil
		}
		return ctrl.Result{}, fmt.Errorf("ConfigurationPolicy %s: %w", req, err)
	}
	start := r.clock.Now()
	defer func() { evaluationSeconds.Observe(r.clock.Since(start).Seconds()) }()
	out, err := r.eval.evaluate(ctx, p)
	// Record what was looked at even after an error, so a change to those objects retries; what
	// it no longer looks at is released.
	r.index.set(req.NamespacedName, out)
	r.caches.set(req.NamespacedName, out.refs)
	if err != nil {
		evaluations.WithLabelValues("error").Inc()
		if errors.Is(err, errRequeue) {
			log.FromContext(ctx).V(1).Info("re-evaluating", "reason", err.Error())
			return ctrl.Result{RequeueAfter: retryAfterConflict}, nil
		}
		return ctrl.Result{}, fmt.Errorf("evaluate ConfigurationPolicy %s: %w", req, err)
	}
	if err := r.pruneDropped(ctx, p, out); err != nil {
		return ctrl.Result{}, fmt.Errorf("ConfigurationPolicy %s: %w", req, err)
	}
	next := buildStatus(p.Status, out, p.Generation, r.clock.Now())
	evaluations.WithLabelValues(string(next.ComplianceState)).Inc()
	result := ctrl.Result{RequeueAfter: interval(p.Spec.EvaluationInterval, next.ComplianceState)}
	if statusUnchanged(p.Status, next) {
		r.observed(req.NamespacedName, false)
		return result, nil
	}
	p.Status = next
	if err := r.client.Status().Update(ctx, p); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: retryAfterConflict}, nil
		}
		return ctrl.Result{}, fmt.Errorf("write status of ConfigurationPolicy %s: %w", req, err)
	}
	statusWrites.Inc()
	r.observed(req.NamespacedName, true)
	// Every status change is news to the Policy's history, as in OCM: a new compliance, a new
	// message or a new spec (customMessage included) evaluated.
	r.recordTransition(compliancemessage.Render(ctx, r.eval.reader, p), p)
	return result, nil
}

// observed tells tests that an evaluation finished and whether it wrote the status.
func (r *Reconciler) observed(policy types.NamespacedName, statusWritten bool) {
	if r.observe != nil {
		r.observe(policy, statusWritten)
	}
}

// recordTransition emits an Event on the policy and, as OCM's status sync expects, on the
// Policy that owns it, with reason "policy: <namespace>/<name>".
func (r *Reconciler) recordTransition(msg string, p *policyv1.ConfigurationPolicy) {
	eventType := corev1.EventTypeNormal
	if p.Status.ComplianceState != policyv1.Compliant {
		eventType = corev1.EventTypeWarning
	}
	reason := "policy: " + p.Namespace + "/" + p.Name
	r.recorder.Eventf(p, nil, eventType, reason, "Evaluate", "%s", msg)
	for _, owner := range p.OwnerReferences {
		if owner.Kind != "Policy" || !strings.HasPrefix(owner.APIVersion, policyv1.GroupVersion.Group+"/") {
			continue
		}
		parent := &policyv1.Policy{}
		parent.SetGroupVersionKind(policyv1.GroupVersion.WithKind("Policy"))
		parent.Name, parent.Namespace, parent.UID = owner.Name, p.Namespace, owner.UID
		r.recorder.Eventf(parent, p, eventType, reason, "Evaluate", "%s", msg)
	}
}

// interval is the re-evaluation period the policy asks for beyond watches; zero for "watch",
// "never" or an unset interval.
func interval(ei policyv1.EvaluationInterval, state policyv1.ComplianceState) time.Duration {
	s := ei.NonCompliant
	if state == policyv1.Compliant {
		s = ei.Compliant
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0
	}
	return d
}

// retryAfterConflict is how soon a policy whose write lost a race with another writer is
// evaluated again, against the newer object.
const retryAfterConflict = 200 * time.Millisecond
