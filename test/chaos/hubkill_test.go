package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/hub/propagator"
)

// The size of TestHubKill_*; docs/reliability.md records a run with 20 rollouts.
const (
	envRollouts = "REGENT_CHAOS_ROLLOUTS"          // progressive rollouts, one after the other (default 3)
	envKills    = "REGENT_CHAOS_KILLS_PER_ROLLOUT" // SIGKILLs of the hub during each (default 2)
	envClusters = "REGENT_CHAOS_CLUSTERS"          // managed clusters over three decision groups (default 3)
	envWindow   = "REGENT_CHAOS_KILL_WINDOW_MS"    // each kill falls uniformly in this window after the edit or the hub's last start (default 1200)
	envSeed     = "REGENT_CHAOS_SEED"              // seed of the kill times (default: the clock; logged)
)

const chaosRoot = "chaos"

// chaosTemplate is the rollout's ConfigurationPolicy at version n.
func chaosTemplate(n int) runtime.RawExtension { return configMapTemplate(chaosRoot, n) }

// configMapTemplate is a ConfigurationPolicy named name whose ConfigMap default/<name> carries
// version n, so a cluster is Compliant at a version only once it was enforced there.
func configMapTemplate(name string, n int) runtime.RawExtension {
	tpl := map[string]any{
		"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"remediationAction": "inform", "severity": "low", "object-templates": []any{map[string]any{
			"complianceType": "musthave",
			"objectDefinition": map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": name, "namespace": "default"},
				"data":     map[string]any{"version": version(n)}},
		}}},
	}
	raw, _ := json.Marshal(tpl)
	return runtime.RawExtension{Raw: raw}
}

func version(n int) string { return "chaos-v" + strconv.Itoa(n) }

// TestHubKill_ProgressiveRolloutsNeitherEnforceOutOfTurnNorLoseReplicas kills `regent hub` with
// SIGKILL at seeded random moments across progressive rollouts (ProgressivePerGroup over three
// decision groups) while a watch records every replica version on every cluster namespace, and
// checks: no cluster ever carries a version as enforce before every cluster of the earlier groups
// was seen Compliant at it, no replica is ever deleted or re-created, and every rollout
// completes — enforced and Compliant everywhere, the ConfigMap at the version on every cluster.
func TestHubKill_ProgressiveRolloutsNeitherEnforceOutOfTurnNorLoseReplicas(t *testing.T) {
	rollouts := int(envInt(t, envRollouts, 3))
	killsPer := int(envInt(t, envKills, 2))
	nClusters := int(envInt(t, envClusters, 3))
	window := time.Duration(envInt(t, envWindow, 1200)) * time.Millisecond
	seed := envInt(t, envSeed, time.Now().UnixNano())
	t.Logf("%d rollouts, %d kills each within %s, %d clusters; %s=%d reproduces the kill times", rollouts, killsPer, window, nClusters, envSeed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))

	var specs []fleet.ClusterSpec
	var names []string
	for i := range nClusters {
		name := fmt.Sprintf("cluster%d", i+1)
		specs = append(specs, fleet.ClusterSpec{Name: name, Labels: map[string]string{"wave": strconv.Itoa(i * 3 / nClusters)}})
		names = append(names, name)
	}
	f := fleettest.Start(t, fleet.Options{Managed: specs})
	h := deploy(t, f, true)
	hub, locals := newClient(t, f.Hub), localClients(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	apply(t, hub, `apiVersion: v1
kind: Namespace
metadata: {name: policies}`, `apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata: {name: chaos}
spec: {clusterSelector: {selectorType: LabelSelector, labelSelector: {}}}`, `apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata: {name: chaos, namespace: policies}
spec: {clusterSet: chaos}`, `apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: waves, namespace: policies}
spec:
  clusterSets: [chaos]
  decisionStrategy:
    groupStrategy:
      decisionGroups:
      - {groupName: wave0, groupClusterSelector: {labelSelector: {matchLabels: {wave: "0"}}}}
      - {groupName: wave1, groupClusterSelector: {labelSelector: {matchLabels: {wave: "1"}}}}
      - {groupName: wave2, groupClusterSelector: {labelSelector: {matchLabels: {wave: "2"}}}}`)
	groups := decisionGroups(t, hub, names)
	t.Logf("decision groups: %v", groups)

	rec := record(ctx, t, hub, propagator.RootPolicyLabel+"=policies."+chaosRoot)
	root := &policyv1.Policy{}
	root.Namespace, root.Name = "policies", chaosRoot
	root.Spec.RemediationAction = policyv1.Enforce
	root.Spec.PolicyTemplates = []*policyv1.PolicyTemplate{{ObjectDefinition: chaosTemplate(1)}}
	if err := json.Unmarshal([]byte(`{"type":"ProgressivePerGroup"}`), &root.Spec.RolloutStrategy); err != nil {
		t.Fatal(err)
	}
	apply(t, hub, `apiVersion: policy.open-cluster-management.io/v1
kind: PlacementBinding
metadata: {name: chaos, namespace: policies}
placementRef: {apiGroup: cluster.open-cluster-management.io, kind: Placement, name: waves}
subjects:
- {apiGroup: policy.open-cluster-management.io, kind: Policy, name: chaos}`)

	midRollout := 0
	var durations []time.Duration
	for n := 1; n <= rollouts; n++ {
		began := time.Now()
		if n == 1 {
			if err := hub.Create(ctx, root); err != nil {
				t.Fatal(err)
			}
		} else {
			fleettest.Edit(t, hub, root, func(p *policyv1.Policy) {
				p.Spec.PolicyTemplates[0].ObjectDefinition = chaosTemplate(n)
			})
		}
		// Each kill comes a random moment after the edit or the hub's previous start (some land
		// while the new hub is still starting, most while the rollout moves); the hub stays down
		// for a random moment up to 2s. All drawn here, so the seed decides them.
		delays, pauses := make([]time.Duration, killsPer), make([]time.Duration, killsPer)
		for i := range delays {
			delays[i] = time.Duration(rng.Int64N(int64(window)))
			pauses[i] = time.Duration(rng.Int64N(int64(2 * time.Second)))
		}
		killer := make(chan error, 1)
		go func() {
			for i := range delays {
				time.Sleep(delays[i])
				if err := h.kill9(); err != nil {
					killer <- err
					return
				}
				// The hub is dead: the root's status, which only it writes, is as it left it.
				if complete, _ := rolledOut(ctx, hub, locals, chaosRoot, names, n); !complete {
					midRollout++
				}
				time.Sleep(pauses[i])
				if err := h.start(); err != nil {
					killer <- err
					return
				}
			}
			killer <- nil
		}()
		killsDone := false
		done := time.Duration(0)
		fleettest.Eventually(t, 5*time.Minute, func() (bool, string) {
			if !killsDone {
				select {
				case err := <-killer:
					if err != nil {
						t.Fatal(err)
					}
					killsDone = true
				default:
				}
			}
			complete, missing := rolledOut(ctx, hub, locals, chaosRoot, names, n)
			if complete && done == 0 {
				done = time.Since(began)
			}
			return complete && killsDone, fmt.Sprintf("rollout %d (kills done: %v): %s", n, killsDone, missing)
		})
		durations = append(durations, done)
		t.Logf("rollout %d complete after %s (hub killed %d times so far, %d of them mid-rollout)", n, done.Round(100*time.Millisecond), h.kills, midRollout)
	}

	// The watch has caught up once it has seen every cluster Compliant at the last version.
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		last := map[string]observation{}
		for _, o := range rec.observations() {
			last[o.cluster] = o
		}
		for _, c := range names {
			if o := last[c]; o.version != version(rollouts) || o.compliance != policyv1.Compliant || o.evaluatedAt != o.generation {
				return false, fmt.Sprintf("the watch's last view of %s: %+v", c, o)
			}
		}
		return true, ""
	})
	seen := rec.observations()
	for _, e := range rec.watchErrors() {
		t.Error(e)
	}
	for _, v := range outOfTurn(seen, groups) {
		t.Error("enforced out of turn: " + v)
	}
	for _, p := range lostOrDuplicated(seen, names) {
		t.Error("replica lost or duplicated: " + p)
	}
	t.Logf("summary: %d rollouts over %d clusters, hub SIGKILLed %d times (%d mid-rollout), %d replica versions observed; "+
		"out of turn: %d, lost or duplicated: %d; rollout times %v",
		rollouts, nClusters, h.kills, midRollout, len(seen), len(outOfTurn(seen, groups)), len(lostOrDuplicated(seen, names)), roundAll(durations))
}

// decisionGroups waits for the placement to decide every cluster and returns each one's
// decision group index, as the hub's rollout reads it.
func decisionGroups(t *testing.T, hub client.Client, clusters []string) map[string]int {
	t.Helper()
	groups := map[string]int{}
	fleettest.Eventually(t, 2*time.Minute, func() (bool, string) {
		list := &clusterv1beta1.PlacementDecisionList{}
		if err := hub.List(context.Background(), list, client.InNamespace("policies"),
			client.MatchingLabels{clusterv1beta1.PlacementLabel: "waves"}); err != nil {
			return false, err.Error()
		}
		for _, d := range list.Items {
			g, err := strconv.Atoi(d.Labels[clusterv1beta1.DecisionGroupIndexLabel])
			if err != nil {
				continue
			}
			for _, c := range d.Status.Decisions {
				groups[c.ClusterName] = g
			}
		}
		return len(groups) == len(clusters), fmt.Sprintf("decision groups of %v, have %v", clusters, groups)
	})
	return groups
}

// rolledOut says whether version n is enforced and Compliant, as evaluated at each replica's
// current generation, on every cluster, the ConfigMap carries it on each managed cluster, and
// the root says the rollout Succeeded.
func rolledOut(ctx context.Context, hub client.Client, locals map[string]client.Client, rootName string, clusters []string, n int) (bool, string) {
	var missing []string
	for _, c := range clusters {
		r := &policyv1.Policy{}
		if err := hub.Get(ctx, types.NamespacedName{Namespace: c, Name: "policies." + rootName}, r); err != nil {
			missing = append(missing, fmt.Sprintf("%s: %v", c, err))
			continue
		}
		o := observe("", r)
		if o.version != version(n) || o.remediation != policyv1.Enforce || o.compliance != policyv1.Compliant || o.evaluatedAt != o.generation {
			missing = append(missing, fmt.Sprintf("%s: replica %s %s %s evaluated at %d of %d", c, o.version, o.remediation, o.compliance, o.evaluatedAt, o.generation))
			continue
		}
		cm := &corev1.ConfigMap{}
		err := locals[c].Get(ctx, types.NamespacedName{Namespace: "default", Name: rootName}, cm)
		if err != nil || cm.Data["version"] != version(n) {
			missing = append(missing, fmt.Sprintf("%s: ConfigMap %v %v", c, cm.Data, err))
		}
	}
	root := &policyv1.Policy{}
	if err := hub.Get(ctx, types.NamespacedName{Namespace: "policies", Name: rootName}, root); err != nil {
		missing = append(missing, err.Error())
	} else if root.Status.RolloutStatus != policyv1.RolloutSucceeded || root.Status.ComplianceState != policyv1.Compliant {
		missing = append(missing, fmt.Sprintf("root %s %s", root.Status.RolloutStatus, root.Status.ComplianceState))
	}
	return len(missing) == 0, strings.Join(missing, "; ")
}

func roundAll(ds []time.Duration) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Round(100 * time.Millisecond).String()
	}
	return out
}
