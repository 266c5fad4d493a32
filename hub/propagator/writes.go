package propagator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/rollout"
)

// fieldOwner is the hub's field manager for the replica status fields it applies.
const fieldOwner = client.FieldOwner("regent-hub")

// writeReplicas brings the replicas to the plan: specs first for every cluster (so a large
// propagation makes every replica exist before it spends requests on statuses), then rollout
// statuses, then deletions of replicas no longer selected. A write that fails fails only its own
// cluster: the others still move, and the failures come back by cluster for the root to report.
func (r *Reconciler) writeReplicas(ctx context.Context, root *policyv1.Policy, p plan, existing map[string]*CachedReplica, read cacheMark) writeOutcome {
	clusters := make([]string, 0, len(p.desired))
	for name := range p.desired {
		clusters = append(clusters, name)
	}
	sort.Strings(clusters)
	ready := r.ready(root, clusters, existing, read)
	waiting := len(clusters) - len(ready)
	clusters = ready
	failed := map[string]error{}
	// The few specs of a plan are shared by every cluster: each is read once, here, before the
	// concurrent writes only look the answer up.
	memo := map[*policyv1.PolicySpec]bool{}
	for _, spec := range p.desired {
		if _, ok := memo[spec]; !ok {
			memo[spec] = enforces(spec)
		}
	}
	enforcing := func(spec *policyv1.PolicySpec) bool { return memo[spec] }
	var run *hubTemplateRun
	if hasHubTemplates(root) {
		run = r.newHubTemplateRun(root)
	}
	// Most clusters of a large root need no write on a given pass: they are told apart here, in
	// this goroutine, and only the others get one of their own (3,000 goroutines per pass would
	// cost more than the comparisons).
	meta := wantMetaOf(root)
	current := func(cluster string, spec *policyv1.PolicySpec) bool {
		rep := existing[cluster]
		return rep != nil && meta.matches(rep) && specMatches(rep, p.hash[spec])
	}
	toWrite := func(enforce bool) []string {
		var out []string
		for _, cluster := range clusters {
			spec := p.desired[cluster]
			if enforcing(spec) == enforce && (run != nil || !current(cluster, spec)) {
				out = append(out, cluster)
			}
		}
		return out
	}
	// Clusters stop enforcing before others start: when a new rollout takes enforcement away from
	// a cluster and gives it to another, the two are never enforced at once. So a cluster that
	// could not be told to stop holds back every cluster about to start.
	gens := &generations{m: map[string]int64{}}
	stopped := r.eachCluster(toWrite(false), func(cluster string) error {
		spec := p.desired[cluster]
		return gens.record(cluster)(r.writeSpec(ctx, root, run, cluster, spec, p.hash[spec], existing[cluster]))
	})
	maps.Copy(failed, stopped)
	out := writeOutcome{failed: failed, waiting: waiting}
	for cluster := range stopped {
		if rep := existing[cluster]; rep != nil && rep.enforces() {
			out.stillEnforcing = append(out.stillEnforcing, cluster)
		}
	}
	if len(out.stillEnforcing) > 0 {
		for _, cluster := range clusters {
			spec := p.desired[cluster]
			if enforcing(spec) && !current(cluster, spec) {
				out.held = append(out.held, cluster)
			}
		}
	} else {
		maps.Copy(failed, r.eachCluster(toWrite(true), func(cluster string) error {
			spec := p.desired[cluster]
			return gens.record(cluster)(r.writeSpec(ctx, root, run, cluster, spec, p.hash[spec], existing[cluster]))
		}))
	}
	// A pass that created replicas leaves their rollout status to the next one, which the creations'
	// own watch events start: across every root, making replicas exist comes first. A replica that
	// could not be created is no creation: it must not hold back the others' statuses.
	var written []string
	created := false
	for _, cluster := range clusters {
		if _, ok := failed[cluster]; ok {
			continue
		}
		if existing[cluster] == nil {
			created = true
		}
		if _, _, needed := statusWrite(cluster, p, existing[cluster], gens.get(cluster)); needed {
			written = append(written, cluster)
		}
	}
	if !created {
		maps.Copy(failed, r.eachCluster(written, func(cluster string) error {
			return r.writeStatus(ctx, root, cluster, p, existing[cluster], gens.get(cluster))
		}))
	}
	var gone []string
	for cluster := range existing {
		if _, ok := p.desired[cluster]; !ok {
			gone = append(gone, cluster)
		}
	}
	maps.Copy(failed, r.eachCluster(gone, func(cluster string) error { return r.deleteReplica(ctx, existing[cluster].Policy()) }))
	for cluster, err := range failed {
		if errors.Is(err, errUnseen) {
			delete(failed, cluster)
			out.unseen = append(out.unseen, cluster)
		}
	}
	return out
}

// ready are the clusters whose replica the cache shows at the hub's last write to it or later, as
// read after read was marked; it ends read. The others wait for the next pass, which the write's
// echo starts: their echoes are no longer the hub's alone to drop (replicaEchoes).
func (r *Reconciler) ready(root *policyv1.Policy, clusters []string, existing map[string]*CachedReplica, read cacheMark) []string {
	defer r.expect.doneReading(read)
	out := make([]string, 0, len(clusters))
	for _, cluster := range clusters {
		key := replicaKey(root, cluster)
		if !r.expect.pending(key, cachedRV(existing[cluster]), read) {
			out = append(out, cluster)
			continue
		}
		r.echoes.awaited(key)
	}
	return out
}

// errUnseen marks a create answered "already exists": the cache has not seen the replica yet.
var errUnseen = errors.New("replica exists but the cache has not seen it yet")

// writeOutcome is what a pass of replica writes could not do.
type writeOutcome struct {
	// failed are the writes that failed, by cluster.
	failed map[string]error
	// held are the clusters whose turn to enforce came but whose enforcing write waits, because
	// stillEnforcing, clusters whose replica enforces, could not be told to stop.
	held, stillEnforcing []string
	// unseen are the clusters whose replica the create found already there: nothing failed, the
	// root is only looked at again once the cache can have caught up.
	unseen []string
	// waiting counts the clusters left alone because the cache has not shown the last write yet.
	waiting int
}

// writeSpec writes the replica of cluster; run is set when root has hub templates. It returns the
// replica's generation after the write, 0 when nothing was written.
func (r *Reconciler) writeSpec(ctx context.Context, root *policyv1.Policy, run *hubTemplateRun, cluster string, spec *policyv1.PolicySpec, hash string, existing *CachedReplica) (int64, error) {
	if run != nil {
		return r.writeTemplatedSpec(ctx, run, cluster, spec, hash, existing)
	}
	if existing != nil && replicaCurrent(existing, root, hash) {
		return 0, nil
	}
	want := newReplica(root, cluster, spec)
	if existing == nil {
		err := r.create(ctx, want)
		if apierrors.IsAlreadyExists(err) {
			// The cache is behind the apiserver: the replica exists (written by this hub before
			// the cache saw it, or by an earlier process). Not a failure: the cache shows it once
			// its watch event arrives, which requeues the root, and it is compared then.
			r.expect.wrote(replicaKey(root, cluster), "", "")
			writes.WithLabelValues("create", "policies").Inc()
			return 0, errUnseen
		}
		if err != nil {
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

// create creates a replica through Writer, or Client when the reconciler has none.
func (r *Reconciler) create(ctx context.Context, p *policyv1.Policy) error {
	if r.Writer != nil {
		return r.Writer.Create(ctx, p)
	}
	return r.Client.Create(ctx, p)
}

// generations are the replicas' generations after the spec writes of a pass, by cluster, for the
// rollout statuses written next.
type generations struct {
	mu sync.Mutex
	m  map[string]int64
}

// record returns what keeps a spec write's generation and passes its error on.
func (g *generations) record(cluster string) func(int64, error) error {
	return func(gen int64, err error) error {
		if err == nil && gen != 0 {
			g.mu.Lock()
			g.m[cluster] = gen
			g.mu.Unlock()
		}
		return err
	}
}

// get returns the generation cluster's replica has after this pass's spec write, 0 when none was
// written.
func (g *generations) get(cluster string) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.m[cluster]
}

// writeStatus gives the replica the rollout status the rollout decided for its cluster, writing it
// only where the replica does not imply it already (policyv1.ImpliedRolloutStatus): every reader
// takes an absent status, or one written for an earlier generation, as the implied one, so a
// progressive rollout's only writes are the replica's creation and its spec updates. A status that
// must be written comes with a Rollout condition whose observedGeneration is the generation it
// describes (a later spec update makes it stale without another write) and whose
// lastTransitionTime is the rollout clock of that cluster, the root's. A status written before
// that no longer holds is removed, so the replica's own rollout status field never shows an older
// one. Server-side apply, so the compliance the spoke writes into the same status is never
// overwritten. written is the replica's generation after this pass's spec write, 0 when none. The
// cached replica has no spec but its remediation action (TrimReplica): what it implies is read
// from the plan's spec it matches.
func (r *Reconciler) writeStatus(ctx context.Context, root *policyv1.Policy, cluster string, p plan, existing *CachedReplica, written int64) error {
	want, gen, needed := statusWrite(cluster, p, existing, written)
	switch {
	case !needed:
		return nil
	case want == "":
		return r.clearStatus(ctx, root, cluster, existing)
	}
	return r.applyStatus(ctx, root, cluster, p.decision.Clusters[cluster], want, gen, existing)
}

// statusWrite says what writeStatus writes on cluster's replica: want at generation gen, or the
// hub's status removed when want is "", and whether anything at all (needed).
func statusWrite(cluster string, p plan, existing *CachedReplica, written int64) (want policyv1.RolloutStatus, gen int64, needed bool) {
	if existing == nil {
		return "", 0, false
	}
	c := p.decision.Clusters[cluster]
	spec := p.desired[cluster]
	gen, implied := existing.generation, policyv1.ImpliedRolloutStatus(spec, reportOf(existing))
	switch {
	case written != 0 && written != existing.generation:
		// A new spec, not evaluated yet: only the spec speaks for it.
		gen, implied = written, policyv1.InitialRolloutStatus(spec)
	case !specMatches(existing, p.hash[spec]):
		// Another spec than the plan's, left as it was (its cluster's turn is held): the cache
		// keeps only its remediation action, and the strategy is the root's.
		carried := &policyv1.PolicySpec{RemediationAction: existing.remediation, RolloutStrategy: spec.RolloutStrategy}
		implied = policyv1.ImpliedRolloutStatus(carried, reportOf(existing))
	}
	want = c.Status
	if want == implied {
		want = ""
	}
	return want, gen, !replicaStatusCurrent(existing, want, c.Status, c.LastTransitionTime, gen)
}

func (r *Reconciler) applyStatus(ctx context.Context, root *policyv1.Policy, cluster string, c rollout.Cluster, want policyv1.RolloutStatus, gen int64, existing *CachedReplica) error {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(policyv1.GroupVersion.String())
	u.SetKind("Policy")
	u.SetNamespace(cluster)
	u.SetName(ReplicaName(root))
	u.Object["status"] = map[string]any{
		"rolloutStatus": string(want),
		"conditions": []any{map[string]any{
			"type":               policyv1.RolloutConditionType,
			"status":             string(conditionStatus(want)),
			"observedGeneration": gen,
			"reason":             string(want),
			"message":            "rollout status of this cluster, set by the hub",
			"lastTransitionTime": c.LastTransitionTime.UTC().Format("2006-01-02T15:04:05Z"),
		}},
	}
	err := r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), fieldOwner, client.ForceOwnership)
	if err != nil {
		return fmt.Errorf("apply rollout status of replica %s/%s: %w", cluster, u.GetName(), err)
	}
	r.expect.wrote(replicaKey(root, cluster), cachedRV(existing), u.GetResourceVersion())
	writes.WithLabelValues("apply", "policies/status").Inc()
	return nil
}

// clearStatus removes the rollout status the hub wrote on a replica, and its Rollout condition,
// when it no longer holds and the replica implies the right one. A merge patch, not an apply of
// nothing: on a replica whose cluster has not reported yet, that would leave its status null,
// which the schema refuses. The hub is the only writer of a replica's conditions.
func (r *Reconciler) clearStatus(ctx context.Context, root *policyv1.Policy, cluster string, existing *CachedReplica) error {
	var conditions []metav1.Condition
	for _, c := range existing.conditions() {
		if c.Type != policyv1.RolloutConditionType {
			conditions = append(conditions, c)
		}
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"rolloutStatus": nil, "conditions": conditions}})
	if err != nil {
		return err
	}
	rep := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: ReplicaName(root)}}
	if err := r.Client.Status().Patch(ctx, rep, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("remove the rollout status of replica %s/%s: %w", cluster, rep.Name, err)
	}
	r.expect.wrote(replicaKey(root, cluster), cachedRV(existing), rep.ResourceVersion)
	writes.WithLabelValues("patch", "policies/status").Inc()
	return nil
}

// update sends want, an update of an existing replica conditioned on the version before the cache
// shows: an edit the cache has not seen yet fails with a conflict, and the reconcile is retried
// with fresh data rather than overwriting blindly. Its echo reconciles nothing (replicaEchoes).
func (r *Reconciler) update(ctx context.Context, want *policyv1.Policy, before string) error {
	key := client.ObjectKeyFromObject(want)
	want.ResourceVersion = before
	r.echoes.sending(key, before)
	var err error
	if r.Writer != nil {
		err = r.Writer.Update(ctx, want)
	} else {
		err = r.Client.Update(ctx, want)
	}
	r.echoes.sent(key, want.ResourceVersion, err)
	if err != nil {
		return err
	}
	r.expect.wrote(key, before, want.ResourceVersion)
	writes.WithLabelValues("update", "policies").Inc()
	return nil
}

func replicaKey(root *policyv1.Policy, cluster string) types.NamespacedName {
	return types.NamespacedName{Namespace: cluster, Name: ReplicaName(root)}
}

func cachedRV(rep *CachedReplica) string {
	if rep == nil {
		return ""
	}
	return rep.resourceVersion
}

// replicaStatusCurrent says whether the replica, at generation gen once this pass's spec write is
// done, already shows what writeStatus would apply: want, or nothing when want is "" (the decided
// status is implied). A status written for gen, or without a generation (before the hub recorded
// one), that says the decided status all the same is left as it is rather than removed.
func replicaStatusCurrent(rep *CachedReplica, want, decided policyv1.RolloutStatus, since *metav1.Time, gen int64) bool {
	written := rep.rolloutStatus
	cond := meta.FindStatusCondition(rep.conditions(), policyv1.RolloutConditionType)
	if want == "" {
		return written == "" && cond == nil ||
			written == decided && (cond == nil || cond.ObservedGeneration == 0 || cond.ObservedGeneration == gen)
	}
	return written == want && cond != nil && cond.Reason == string(want) && cond.ObservedGeneration == gen &&
		cond.LastTransitionTime.Equal(since)
}

func conditionStatus(s policyv1.RolloutStatus) metav1.ConditionStatus {
	if s == policyv1.RolloutSucceeded {
		return metav1.ConditionTrue
	}
	return metav1.ConditionFalse
}

func (r *Reconciler) deleteReplica(ctx context.Context, rep *policyv1.Policy) error {
	err := r.Client.Delete(ctx, rep, client.Preconditions{UID: &rep.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete replica %s/%s: %w", rep.Namespace, rep.Name, err)
	}
	writes.WithLabelValues("delete", "policies").Inc()
	return nil
}

// cleanup deletes every replica of a root that no longer exists.
func (r *Reconciler) cleanup(ctx context.Context, root types.NamespacedName) error {
	forget(root.Namespace, root.Name)
	replicas, err := r.replicasOf(ctx, root)
	if err != nil {
		return err
	}
	reps := make([]string, 0, len(replicas))
	for cluster := range replicas {
		reps = append(reps, cluster)
	}
	if _, known := r.known.LoadAndDelete(root); !known {
		why := fmt.Sprintf("root policy %s does not exist", root)
		return r.each(reps, func(cluster string) error { return r.deleteOrphan(ctx, replicas[cluster].Policy(), why) })
	}
	return r.each(reps, func(cluster string) error { return r.deleteReplica(ctx, replicas[cluster].Policy()) })
}

// each runs fn for every item, at most Workers at a time, and joins the errors.
func (r *Reconciler) each(items []string, fn func(string) error) error {
	failed := r.eachCluster(items, fn)
	errs := make([]error, 0, len(failed))
	for _, err := range failed {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// eachCluster runs fn for every cluster, at most Workers at a time, and returns the errors by
// cluster.
func (r *Reconciler) eachCluster(clusters []string, fn func(string) error) map[string]error {
	workers := max(r.Workers, 1)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed = map[string]error{}
		sem    = make(chan struct{}, workers)
	)
	for _, cluster := range clusters {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(cluster); err != nil {
				mu.Lock()
				failed[cluster] = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failed
}
