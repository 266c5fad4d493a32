package propagator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	sdkv1beta1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	policyv1 "regent.dev/regent/api/policy/v1"
	policyv1beta1 "regent.dev/regent/api/policy/v1beta1"
	"regent.dev/regent/hub/rollout"
	"regent.dev/regent/placement/decisions"
)

// Reconciler reconciles one root Policy: its replicas, their rollout, and its status.
type Reconciler struct {
	// Client writes to the apiserver; reads go to Reader.
	Client client.Client
	// Writer creates and updates replicas, reading back only what the hub needs of the answer;
	// Client when nil.
	Writer *ReplicaWriter
	// Reader is the manager's cache.
	Reader client.Reader
	// Replicas, when set, is the cache replicas are read from (NewReplicaCache), its Policy
	// informer holding CachedReplicas; Reader's Policy informer then holds the roots. Replicas are
	// read from Reader when nil.
	Replicas cache.Cache
	// APIReader reads what must not be cached: the clusters' encryption key Secrets, which the
	// hub may get by name but not list. Client when nil.
	APIReader client.Reader
	// KeyRotation is how often the clusters' encryption keys are replaced: DefaultKeyRotation
	// when zero, never when negative.
	KeyRotation time.Duration
	// Clock times key rotation; the real clock when nil.
	Clock    clock.PassiveClock
	Planner  *rollout.Planner
	Recorder events.EventRecorder
	// Workers bounds the writes one reconcile issues at once.
	Workers int
	// MaxReplicatedBytes caps what one root's replicas take in etcd (serialized replica ×
	// selected clusters); zero or negative means no cap.
	MaxReplicatedBytes int64
	// StatusInterval is how long a rollout in progress may hold clusters' answers and turns back from its
	// root's status (root_status_pace.go), at least: DefaultStatusInterval when zero, never when
	// negative; the more lines the progressing roots have, the longer (statusInterval).
	StatusInterval time.Duration

	expect  expectations
	retries writeRetries
	// decisions remembers each placement's decision groups until its decisions change.
	decisions decisions.Memo
	// statusWrites gate reconciles on a root whose cached copy predates the hub's last status patch.
	statusWrites rootVersions
	// pace holds answers and turns back from a progressing root's status between writes.
	pace statusPace
	// answers routes clusters' answers by what each root's last plan waits for.
	answers answerGate
	// echoes tell the watch events of the hub's own replica updates, which reconcile nothing.
	echoes replicaEchoes
	// known holds the roots this process has reconciled: a replica whose root it never saw was
	// not written by it, and is deleted as an orphan only where OCM would delete it.
	known sync.Map
	// replicaIndex, when set, is the replica informer's indexer with the rootIndex index.
	replicaIndex toolscache.Indexer
	// templateWatches re-propagates roots whose hub templates read an object that changed.
	templateWatches *templateWatches
}

// Reconcile reads the root and everything that selects it, decides, then writes.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	began := time.Now()
	defer func() { reconcileSeconds.Observe(time.Since(began).Seconds()) }()

	// A reconcile that plans nothing leaves its root's answers to the batch.
	planned := false
	defer func() {
		if !planned {
			r.answers.forget(req.NamespacedName)
		}
	}()
	root := &policyv1.Policy{}
	if err := r.Reader.Get(ctx, req.NamespacedName, root); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("get root policy %s: %w", req, err)
		}
		// The root is gone: so are its replicas.
		r.retries.forget(req.NamespacedName)
		r.statusWrites.forget(req.NamespacedName)
		r.pace.gone(req.NamespacedName)
		r.Planner.Forget(req.Namespace + "/" + req.Name)
		return ctrl.Result{}, r.cleanup(ctx, req.NamespacedName)
	}
	if isReplica(root) {
		return ctrl.Result{}, nil
	}
	if behind, err := r.awaitEcho(ctx, req.NamespacedName, root); behind || err != nil {
		return ctrl.Result{}, err
	}
	if refused, err := r.refuseRootInClusterNamespace(ctx, root); refused || err != nil {
		return ctrl.Result{}, err
	}
	r.known.Store(req.NamespacedName, struct{}{})
	read := r.expect.markReading(ReplicaName(root))
	defer r.expect.doneReading(read)
	replicas, err := r.replicasOf(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	for cluster, rep := range replicas {
		if rep.name != ReplicaName(root) {
			delete(replicas, cluster)
			if err := r.deleteOrphan(ctx, rep.Policy(), "its name is not "+ReplicaName(root)); err != nil {
				return ctrl.Result{}, err
			}
		}
	}

	in, err := r.read(ctx, root, replicas)
	if err != nil {
		// For example a PlacementDecision without its group index: retried, and said on the root.
		return ctrl.Result{}, errors.Join(err, r.reportProblem(ctx, root, "PlacementUnreadable", err))
	}
	if err := r.checkReplicatedSize(root, in.selected); err != nil {
		// Only an edit of the root or of its placement can fix it: nothing to retry.
		return ctrl.Result{}, r.reportProblem(ctx, root, replicatedSizeOverLimit, err)
	}
	plan, err := decide(r.Planner, in)
	if err != nil {
		// A bad strategy (unparsable deadline, maxFailures) is the user's to fix: say so on the
		// root and wait for an edit rather than retrying.
		return ctrl.Result{}, r.reportProblem(ctx, root, "InvalidRolloutStrategy", err)
	}
	// While the rollout progresses, its status may hold answers back for every; so may an
	// answer's route (hold), which waits for nothing otherwise.
	lines, hold := 0, time.Duration(0)
	if plan.decision.Aggregate == policyv1.RolloutProgressing {
		lines = len(plan.decision.Clusters)
	}
	every := r.pace.progress(req.NamespacedName, lines, r.StatusInterval)
	if lines > 0 {
		hold = every
	}
	held, patched, err := r.writeRootStatus(ctx, root, plan, every)
	if err != nil {
		return ctrl.Result{}, err
	}
	// The patch's echo reconciles nothing (rootEchoes): a decision its own record would change
	// (Planner.Settles) is taken again here, once its replicas are written.
	again := patched && !r.Planner.Settles(plan.input, plan.decision)
	// A cluster whose replica cannot be written (a terminating namespace, a quota or admission
	// webhook that refuses it) is reported on the root and retried; it holds back neither the other
	// clusters nor the rollout's own clock, which an error returned here would replace by backoff.
	out := r.writeReplicas(ctx, root, plan, replicas, read)
	observe(root, plan)
	if err := r.reportWrites(ctx, root, len(plan.desired), out); err != nil {
		return ctrl.Result{}, err
	}
	retry := r.retries.next(req.NamespacedName, len(out.failed) > 0, time.Now())
	if retry == 0 && len(out.unseen) > 0 {
		// Without backoff: nothing failed. A replica lacking the root label sends no event.
		retry = writeRetryMin
	}
	retry = r.expect.recheck(out.waiting, retry)
	if r.echoes.missedFor(ReplicaName(root)) && (retry == 0 || retry > replicaEventBatch) {
		// An event taken for a write's echo was another version: it is read now.
		retry = replicaEventBatch
	}
	after := requeueAfter(plan.decision.RecheckAfter, retry)
	if held > 0 && (after == 0 || held < after) {
		after = held
	}
	if again {
		decidedAgain.Inc()
		after = decideAgain
	}
	if r.replicaIndex != nil {
		planned = true
		if r.answers.record(req.NamespacedName, root, plan, hold, r.currentReplica(ReplicaName(root))) &&
			(after == 0 || after > replicaEventBatch) {
			after = replicaEventBatch
		}
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// decideAgain is how soon a root whose recorded decision does not settle is decided again: at
// once, as the echo of its status patch used to, but after the writes of this reconcile.
const decideAgain = 10 * time.Millisecond

// awaitEcho says whether the cached root predates the hub's last status patch of it: the patch's
// echo then requeues it. The echo is marked awaited before the root is read again, so an echo
// the predicate dropped before the mark is in the cache by the second read.
func (r *Reconciler) awaitEcho(ctx context.Context, key types.NamespacedName, root *policyv1.Policy) (bool, error) {
	if !r.statusWrites.behind(key, root.ResourceVersion) {
		return false, nil
	}
	r.statusWrites.awaited(key)
	if err := r.Reader.Get(ctx, key, root); err != nil {
		return false, fmt.Errorf("get root policy %s: %w", key, err)
	}
	return r.statusWrites.behind(key, root.ResourceVersion), nil
}

// rootEchoes drops the echoes of the hub's own root status patches (rootVersions).
func (r *Reconciler) rootEchoes() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		if r.statusWrites.echo(client.ObjectKeyFromObject(e.ObjectNew), e.ObjectNew.GetResourceVersion()) {
			ownEchoes.WithLabelValues("root").Inc()
			return false
		}
		return true
	}}
}

// read gathers, from the cache, everything decide needs.
func (r *Reconciler) read(ctx context.Context, root *policyv1.Policy, replicas map[string]*CachedReplica) (input, error) {
	bindings := &policyv1.PlacementBindingList{}
	if err := r.Reader.List(ctx, bindings, client.InNamespace(root.Namespace)); err != nil {
		return input{}, fmt.Errorf("list placement bindings in %s: %w", root.Namespace, err)
	}
	policySets := &policyv1beta1.PolicySetList{}
	if err := r.Reader.List(ctx, policySets, client.InNamespace(root.Namespace)); err != nil {
		return input{}, fmt.Errorf("list policy sets in %s: %w", root.Namespace, err)
	}
	in := input{root: root, replicas: replicas, selection: selectRoot(root, bindings.Items, policySets.Items)}
	if root.Spec.Disabled {
		return in, nil
	}
	var err error
	if in.setMembers, err = r.readPolicySetMembers(ctx, root); err != nil {
		return input{}, err
	}
	if in.violations, err = r.violations(ctx, root); err != nil {
		return input{}, err
	}
	if in.groups, err = r.groups(ctx, in.selection.Placements, in.selection.Rules); err != nil {
		return input{}, err
	}
	in.selected = rollout.ClustersOf(in.groups)
	if len(in.selection.Enforcing)+len(in.selection.EnforcingRules) > 0 {
		enforcing, err := r.groups(ctx, in.selection.Enforcing, in.selection.EnforcingRules)
		if err != nil {
			return input{}, err
		}
		in.enforcing = rollout.ClustersOf(enforcing)
	}
	return in, nil
}

// groups are the decision groups of placements, then one group per PlacementRule.
func (r *Reconciler) groups(ctx context.Context, placements, rules []types.NamespacedName) (sdkv1beta1.ClusterGroupsMap, error) {
	groups, err := r.decisions.Groups(ctx, r.Reader, placements)
	if err != nil || len(rules) == 0 {
		return groups, err
	}
	fromRules, err := ruleGroups(ctx, r.Reader, rules)
	if err != nil {
		return nil, err
	}
	return decisions.Merge(groups, fromRules), nil
}

// writeRootStatus writes the root's status when it changed, before any replica is touched. A JSON
// patch without resourceVersion, so it never conflicts. It cannot regress the record: the status is
// computed from the cache, and a reconcile whose cached root predates the hub's own last patch does
// not run (statusWrites); nothing else writes a root's status, and spec edits do not touch it. A
// decision computed just before a user's edit is one the hub could as well have taken just before
// it; the edit's own event recomputes the status. A change the replicas carry too (clusters'
// answers and turns of a rollout in progress) may be held back for every (root_status_pace.go):
// the replicas are then written first, and held is when to write the status.
func (r *Reconciler) writeRootStatus(ctx context.Context, root *policyv1.Policy, p plan, every time.Duration) (held time.Duration, patched bool, err error) {
	status := rootStatusFor(root, p)
	key := client.ObjectKeyFromObject(root)
	if equality.Semantic.DeepEqual(&root.Status, status) {
		r.pace.forget(key)
		return 0, false, nil
	}
	if every > 0 && holdable(&root.Status, status, clocksOf(root)) {
		if held = r.pace.wait(key, every, time.Now()); held > 0 {
			statusHeld.Inc()
			return held, false, nil
		}
	}
	before := root.Status.DeepCopy()
	if err := r.patchRootStatus(ctx, root, status); err != nil {
		return 0, false, err
	}
	r.pace.forget(key)
	r.announce(root, before, p)
	return 0, true, nil
}

// rootStatusFor is the root's status as the plan has it.
func rootStatusFor(root *policyv1.Policy, p plan) *policyv1.PolicyStatus {
	// One line per selected cluster: when they already say what the plan does, the root's own
	// are kept (root is the reconcile's copy), neither copied nor rebuilt, and compare equal at once.
	rest := root.Status
	rest.Status = nil
	status := rest.DeepCopy()
	status.Placement = p.selection.Status
	if linesCurrent(root.Status.Status, p.decision, p.compliance, p.violations) {
		status.Status = root.Status.Status
	} else {
		status.Status = clusterLines(p.decision, p.compliance, p.violations)
	}
	status.ComplianceState = aggregateCompliance(status.Status)
	status.RolloutStatus = p.decision.Aggregate
	setConditions(&status.Conditions, rolloutConditionFor(root.Generation, p.decision, root.Spec.Disabled),
		overridesConditionFor(root.Generation, p.overridesIgnored), deprecationConditionFor(root.Generation, p.selection))
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: propagatedCondition, Status: metav1.ConditionTrue,
		ObservedGeneration: root.Generation, Reason: "Propagated", Message: fmt.Sprintf("replicated to %d clusters", len(p.desired))})
	return status
}

// announce records an Event for each step of the rollout the status write just made official.
func (r *Reconciler) announce(root *policyv1.Policy, before *policyv1.PolicyStatus, p plan) {
	d := p.decision
	taken := turnsTaken(root.Generation, before, d)
	// Group steps are the rollout's own steps only when it goes group by group.
	var started, completed []string
	if s := root.Spec.RolloutStrategy; s != nil && s.Type == clusterv1alpha1.ProgressivePerGroup {
		started, completed = groupSteps(p.groups, before.Status, taken, d)
	}
	// One Event per reason and write: client-go's events broadcaster may fold a root's Events of
	// one reason and action into a series that keeps the first note (isomorphic Events); two
	// groups' Events from one write kept one name between them in TestRootStatusPace_*.
	if len(completed) > 0 {
		r.Recorder.Eventf(root, nil, "Normal", "RolloutGroupCompleted", "Rollout", "%s", eachGroup(completed, "decision group %s: every cluster succeeded"))
	}
	if len(started) > 0 {
		r.Recorder.Eventf(root, nil, "Normal", "RolloutGroupStarted", "Enforce", "%s", eachGroup(started, "decision group %s started"))
	}
	if len(taken) > 0 {
		r.Recorder.Eventf(root, nil, "Normal", "RolloutStarted", "Enforce", "enforcing on %s", names(taken))
	}
	if len(d.TimedOut) > 0 {
		r.Recorder.Eventf(root, nil, "Warning", "RolloutTimedOut", "Rollout", "no result within the progress deadline from %s", names(d.TimedOut))
	}
	prev := meta.FindStatusCondition(before.Conditions, rolloutCondition)
	stopped := prev != nil && prev.Reason == "FailureBudgetSpent"
	switch {
	case d.BudgetSpent && !stopped:
		r.Recorder.Eventf(root, nil, "Warning", "RolloutStopped", "Rollout", "failure budget spent by %s: no further cluster is enforced", names(d.Failing))
	case d.Aggregate == policyv1.RolloutSucceeded && before.RolloutStatus != policyv1.RolloutSucceeded:
		r.Recorder.Eventf(root, nil, "Normal", "RolloutSucceeded", "Rollout", "all %d clusters succeeded", len(d.Clusters))
	}
}

// reportProblem says on the root, in its Propagated condition, why it is not propagated. The
// Rollout condition is left alone: its observedGeneration marks which generation's rollout the
// per-cluster records belong to, and no rollout step was taken.
func (r *Reconciler) reportProblem(ctx context.Context, root *policyv1.Policy, reason string, cause error) error {
	status := root.Status.DeepCopy()
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: propagatedCondition, Status: metav1.ConditionFalse,
		ObservedGeneration: root.Generation, Reason: reason, Message: cause.Error()})
	if equality.Semantic.DeepEqual(&root.Status, status) {
		return nil
	}
	r.Recorder.Eventf(root, nil, "Warning", reason, "Propagate", "%v", cause)
	return r.patchRootStatus(ctx, root, status)
}

// patchRootStatus sends what differs between the cached root's status and status as a JSON patch
// (rootStatusPatch; no resourceVersion: see writeRootStatus), reads back only the root's metadata,
// and leaves root with status and the apiserver's new resourceVersion. The answer would otherwise
// be the whole root again, decoded for nothing: the root's own watch event brings it to the cache.
func (r *Reconciler) patchRootStatus(ctx context.Context, root *policyv1.Policy, status *policyv1.PolicyStatus) error {
	patch, err := rootStatusPatch(&root.Status, status)
	if err != nil {
		return fmt.Errorf("patch status of root policy %s/%s: %w", root.Namespace, root.Name, err)
	}
	if patch == nil {
		return nil
	}
	answer := &metav1.PartialObjectMetadata{}
	answer.SetGroupVersionKind(policyv1.GroupVersion.WithKind("Policy"))
	answer.Namespace, answer.Name = root.Namespace, root.Name
	err = r.Client.Status().Patch(ctx, answer, client.RawPatch(types.JSONPatchType, patch))
	if apierrors.IsInvalid(err) {
		// A test failed: the server's lines are not the cache's (a status edited by hand, say).
		// The status as the hub computed it replaces them whole.
		if patch, err = wholeStatusPatch(status); err == nil {
			err = r.Client.Status().Patch(ctx, answer, client.RawPatch(types.JSONPatchType, patch))
		}
	}
	if err != nil {
		return fmt.Errorf("patch status of root policy %s/%s: %w", root.Namespace, root.Name, err)
	}
	before := root.ResourceVersion
	root.Status, root.ResourceVersion = *status, answer.ResourceVersion
	r.statusWrites.patched(client.ObjectKeyFromObject(root), before, root.ResourceVersion)
	writes.WithLabelValues("patch", "policies/status").Inc()
	return nil
}

// replicasOf returns the replicas of a root by cluster, from the replica cache's index. They are
// the cache's own and must not be modified.
func (r *Reconciler) replicasOf(ctx context.Context, root types.NamespacedName) (map[string]*CachedReplica, error) {
	if r.replicaIndex != nil {
		objs, err := r.replicaIndex.ByIndex(rootIndex, root.Namespace+"."+root.Name)
		if err != nil {
			return nil, fmt.Errorf("list replicas of %s: %w", root, err)
		}
		out := make(map[string]*CachedReplica, len(objs))
		for _, o := range objs {
			switch p := o.(type) {
			case *CachedReplica:
				out[p.namespace] = p
			case *policyv1.Policy:
				// A cache without the hub's transform (NewManager's) holds Policies.
				out[p.Namespace] = recordOf(p)
			}
		}
		return out, nil
	}
	list := &policyv1.PolicyList{}
	if err := r.Reader.List(ctx, list, client.MatchingFields{rootIndex: root.Namespace + "." + root.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list replicas of %s: %w", root, err)
	}
	out := make(map[string]*CachedReplica, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Namespace] = recordOf(&list.Items[i])
	}
	return out, nil
}

// replicasIn returns the cached replicas in namespace, from the replica informer's namespace
// index when the reconciler has it.
func (r *Reconciler) replicasIn(ctx context.Context, namespace string) ([]client.Object, error) {
	if r.replicaIndex != nil {
		objs, err := r.replicaIndex.ByIndex(toolscache.NamespaceIndex, namespace)
		if err != nil {
			return nil, err
		}
		out := make([]client.Object, 0, len(objs))
		for _, o := range objs {
			if rep, ok := o.(client.Object); ok && isReplica(rep) {
				out = append(out, rep)
			}
		}
		return out, nil
	}
	list := &policyv1.PolicyList{}
	if err := r.Reader.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(list.Items))
	for i := range list.Items {
		if isReplica(&list.Items[i]) {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// strategyOf returns the root's strategy, All when it has none, and whether its enforcement rolls
// out progressively.
func strategyOf(root *policyv1.Policy) (clusterv1alpha1.RolloutStrategy, rollout.Mode) {
	s := clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All}
	if root.Spec.RolloutStrategy != nil && root.Spec.RolloutStrategy.Type != "" {
		s = *root.Spec.RolloutStrategy
	}
	switch {
	case !enforces(&root.Spec):
		return s, rollout.InformAsIs
	case s.Type == clusterv1alpha1.All:
		return s, rollout.AsIs
	}
	return s, rollout.Progressive
}
