package propagator_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet/fleettest"
)

// hubTemplatedRoot is a root whose ConfigurationPolicy reads, through hub templates, the ConfigMap
// source in namespace from, keyed by the cluster's name and label, and its cluster's ManagedCluster.
func (e *env) hubTemplatedRoot(name, from string) {
	e.t.Helper()
	e.templatedRoot(name, nil, map[string]string{
		"cluster": "{{hub .ManagedClusterName hub}}",
		"region":  fmt.Sprintf(`{{hub fromConfigMap %q "source" (printf "region-%%s" (index .ManagedClusterLabels "zone")) hub}}`, from),
		"policy":  "{{hub .PolicyMetadata.name hub}}",
		"managed": `{{hub (lookup "cluster.open-cluster-management.io/v1" "ManagedCluster" "" .ManagedClusterName).metadata.name hub}}`,
		"spoke":   `{{ fromClusterClaim "id.k8s.io" }}`,
	})
}

// templatedRoot is a root whose ConfigurationPolicy asks for a ConfigMap with data, its hub
// templates resolved with opts.
func (e *env) templatedRoot(name string, opts *policyv1.HubTemplateOptions, data map[string]string) {
	e.t.Helper()
	tmpl, err := json.Marshal(map[string]any{
		"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"severity": "low", "object-templates": []any{map[string]any{"complianceType": "musthave",
			"objectDefinition": map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "out", "namespace": "default"}, "data": data}}}},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.create(&policyv1.Policy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: policyv1.PolicySpec{RemediationAction: policyv1.Inform, HubTemplateOptions: opts,
			PolicyTemplates: []*policyv1.PolicyTemplate{{ObjectDefinition: runtime.RawExtension{Raw: tmpl}}}},
	})
}

// replicaData is the data of the ConfigMap the replica's ConfigurationPolicy asks for.
func replicaData(rep *policyv1.Policy) map[string]any {
	var cp struct {
		Spec struct {
			ObjectTemplates []struct {
				ObjectDefinition struct {
					Data map[string]any `json:"data"`
				} `json:"objectDefinition"`
			} `json:"object-templates"`
		} `json:"spec"`
	}
	if rep == nil || len(rep.Spec.PolicyTemplates) == 0 {
		return nil
	}
	if err := json.Unmarshal(rep.Spec.PolicyTemplates[0].ObjectDefinition.Raw, &cp); err != nil || len(cp.Spec.ObjectTemplates) == 0 {
		return nil
	}
	return cp.Spec.ObjectTemplates[0].ObjectDefinition.Data
}

// Without hubTemplateOptions.serviceAccountName, as on OCM: the root's namespace and the cluster's
// own ManagedCluster.
func TestHubTemplates_ResolvedPerClusterFromTheRootNamespaceAndFollowTheirSources(t *testing.T) {
	e := newEnv(t)
	c1, c2 := e.cluster("c1", map[string]string{"zone": "a"}), e.cluster("c2", map[string]string{"zone": "b"})
	source := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "source", Namespace: e.ns},
		Data: map[string]string{"region-a": "east", "region-b": "west"}}
	e.create(source)
	e.startHub()
	e.hubTemplatedRoot("p", e.ns)
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", c1, c2)
	e.expectReplicas("p", c1, c2)

	want := map[string]map[string]any{
		c1: {"cluster": c1, "region": "east", "policy": "p", "managed": c1, "spoke": `{{ fromClusterClaim "id.k8s.io" }}`},
		c2: {"cluster": c2, "region": "west", "policy": "p", "managed": c2, "spoke": `{{ fromClusterClaim "id.k8s.io" }}`},
	}
	e.eventually("replicas resolved per cluster", func() (bool, string) {
		for cluster, w := range want {
			got := replicaData(e.replicas("p")[cluster])
			if fmt.Sprint(got) != fmt.Sprint(w) {
				return false, fmt.Sprintf("%s: data %v, want %v", cluster, got, w)
			}
		}
		return true, ""
	})
	// The rollout sees every replica as carrying the root's current version.
	e.eventually("root status lists both clusters", func() (bool, string) {
		r := e.root("p")
		return len(r.Status.Status) == 2, fmt.Sprintf("status %+v", r.Status)
	})
	// A cluster's answer about its resolved replica is an answer about the root's current version:
	// the rollout to that cluster succeeds.
	e.answer("p", c1, policyv1.Compliant)
	e.eventually("c1's rollout succeeded", func() (bool, string) {
		r := e.root("p")
		return fmt.Sprint(withStatus(r, policyv1.RolloutSucceeded)) == fmt.Sprint([]string{c1}), fmt.Sprintf("statuses %v", statuses(r))
	})

	// A change of the ConfigMap the templates read re-propagates.
	fleettest.Edit(t, e.c, source, func(cm *corev1.ConfigMap) { cm.Data["region-a"] = "north" })
	e.eventually("the new value reaches c1's replica", func() (bool, string) {
		got := replicaData(e.replicas("p")[c1])
		return got["region"] == "north", fmt.Sprintf("data %v", got)
	})
	// So does a change of the cluster's labels.
	mc := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: c2}}
	fleettest.Edit(t, e.c, mc, func(mc *clusterv1.ManagedCluster) { mc.Labels["zone"] = "a" })
	e.eventually("c2's new label reaches its replica", func() (bool, string) {
		got := replicaData(e.replicas("p")[c2])
		return got["region"] == "north", fmt.Sprintf("data %v", got)
	})
}

func TestHubTemplates_OutsideTheRootNamespaceAreRefused(t *testing.T) {
	e := newEnv(t)
	c1 := e.cluster("c1", map[string]string{"zone": "a"})
	e.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "source", Namespace: "default"},
		Data: map[string]string{"region-a": "east"}})
	e.startHub()
	e.hubTemplatedRoot("p", "default")
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", c1)
	e.eventually("the root reports the refused read", func() (bool, string) {
		cond := meta.FindStatusCondition(e.root("p").Status.Conditions, "ReplicasWritten")
		if cond == nil {
			return false, "no ReplicasWritten condition"
		}
		return cond.Status == metav1.ConditionFalse && strings.Contains(cond.Message, "namespace default is not allowed"), cond.Message
	})
	if reps := e.replicas("p"); len(reps) != 0 {
		t.Errorf("a replica was written from a refused template: %v", reps)
	}
}
