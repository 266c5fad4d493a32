package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/quickstart"
)

// How long TestConnectionCut's hub↔spoke cut lasts; docs/reliability.md records a 5-minute one.
const envCutSeconds = "REGENT_CHAOS_CUT_SECONDS" // default 10

const steadyRoot = "steady"

// spokeObjects are the objects a spoke addon keeps on its cluster for one policy, by what
// identifies them across a run: a re-created object has a new UID, a rewritten one a new
// generation.
type spokeObjects struct {
	copyUID, templateUID, configMapUID    types.UID
	copyGeneration, templateGeneration    int64
	replicaUID                            types.UID // the hub's replica
	configMapVersion, templateRemediation string
}

func readSpoke(ctx context.Context, hub, local client.Client, cluster string) (spokeObjects, error) {
	var o spokeObjects
	replica, cp := &policyv1.Policy{}, &policyv1.Policy{}
	if err := hub.Get(ctx, types.NamespacedName{Namespace: cluster, Name: "policies." + steadyRoot}, replica); err != nil {
		return o, fmt.Errorf("hub replica: %w", err)
	}
	if err := local.Get(ctx, types.NamespacedName{Namespace: cluster, Name: "policies." + steadyRoot}, cp); err != nil {
		return o, fmt.Errorf("the cluster's copy: %w", err)
	}
	tpl := &policyv1.ConfigurationPolicy{}
	if err := local.Get(ctx, types.NamespacedName{Namespace: cluster, Name: steadyRoot}, tpl); err != nil {
		return o, fmt.Errorf("ConfigurationPolicy: %w", err)
	}
	cm := &corev1.ConfigMap{}
	if err := local.Get(ctx, types.NamespacedName{Namespace: "default", Name: steadyRoot}, cm); err != nil {
		return o, fmt.Errorf("ConfigMap: %w", err)
	}
	return spokeObjects{copyUID: cp.UID, templateUID: tpl.UID, configMapUID: cm.UID, copyGeneration: cp.Generation,
		templateGeneration: tpl.Generation, replicaUID: replica.UID, configMapVersion: cm.Data["version"],
		templateRemediation: string(tpl.Spec.RemediationAction)}, nil
}

// TestConnectionCut_SpokeAddonRecoversWithoutRestartAndRecreatesNothing puts a TCP proxy between
// the spoke addon and each apiserver it talks to, its own cluster's and the hub's, and breaks
// them: every connection to its own apiserver is reset mid-watch, then the hub is cut off for a
// while. The addon keeps running (no restart), keeps enforcing during the hub cut (and the
// cluster's policy server keeps answering admission), takes the
// policy's next version after each, and its status converges on the hub; no object is
// re-created and each spec is written once per change.
func TestConnectionCut_SpokeAddonRecoversWithoutRestartAndRecreatesNothing(t *testing.T) {
	cut := time.Duration(envInt(t, envCutSeconds, 10)) * time.Second
	f := fleettest.Start(t, fleet.Options{Managed: []fleet.ClusterSpec{{Name: "cluster1"}}})
	c := f.Managed[0]
	deploy(t, f, false)
	hubProxy, localProxy := startProxy(t, hostPort(t, f.Hub.Config)), startProxy(t, hostPort(t, c.Config))
	ctx := context.Background()
	// One policy-server replica answers the cluster's admission webhooks, with or without the hub.
	ps, err := quickstart.StartPolicyServer(ctx, f, c, regentBin, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ps.Close() })
	addon := startAddon(t, f, c, hubProxy.Addr(), localProxy.Addr(), "--policy-server-url", ps.URL, "--policy-server-ca", ps.CAFile)
	hub, local := newClient(t, f.Hub), newClient(t, c)
	module, err := filepath.Abs(filepath.Join("testdata", "no-privileged.rego"))
	if err != nil {
		t.Fatal(err)
	}

	root := steadySetup(t, hub, module)
	converged := func(n int) {
		t.Helper()
		fleettest.Eventually(t, 3*time.Minute, func() (bool, string) {
			return rolledOut(ctx, hub, map[string]client.Client{c.Name: local}, steadyRoot, []string{c.Name}, n)
		})
	}
	converged(1)
	fleettest.Eventually(t, 3*time.Minute, func() (bool, string) {
		err := admits(ctx, local, true)
		return err != nil && strings.Contains(err.Error(), "container app is privileged"),
			fmt.Sprintf("a privileged pod denied by the policy server: %v", err)
	})
	before, err := readSpoke(ctx, hub, local, c.Name)
	if err != nil {
		t.Fatal(err)
	}
	running := func() {
		t.Helper()
		select {
		case <-addon.Done():
			t.Fatalf("the spoke addon exited (%v): it must recover by itself", addon.State())
		default:
		}
	}

	t.Run("OwnApiserverConnectionsResetMidWatch", func(t *testing.T) {
		accepted, _ := localProxy.counts()
		localProxy.Cut()
		cutAt := time.Now()
		// Down long enough that the addon's reconnects meet resets too.
		time.Sleep(2 * time.Second)
		localProxy.Heal()
		fleettest.Edit(t, hub, root, func(p *policyv1.Policy) {
			p.Spec.PolicyTemplates[0].ObjectDefinition = configMapTemplate(steadyRoot, 2)
		})
		converged(2)
		t.Logf("own apiserver connections reset for 2s: the next version enforced and Compliant on the hub %s after the cut",
			time.Since(cutAt).Round(100*time.Millisecond))
		// The watch on the enforced object came back too: a ConfigMap deleted behind the addon's
		// back is put back.
		deleteConfigMap(t, local)
		fleettest.Eventually(t, time.Minute, func() (bool, string) {
			after, err := readSpoke(ctx, hub, local, c.Name)
			return err == nil && after.configMapVersion == version(2), fmt.Sprintf("the ConfigMap enforced again: %v", err)
		})
		after, err := readSpoke(ctx, hub, local, c.Name)
		if err != nil {
			t.Fatal(err)
		}
		if after.copyGeneration != before.copyGeneration+1 || after.templateGeneration != before.templateGeneration+1 {
			t.Errorf("specs written more than once for one change: the cluster's copy generation %d→%d, ConfigurationPolicy %d→%d",
				before.copyGeneration, after.copyGeneration, before.templateGeneration, after.templateGeneration)
		}
		running()
		if now, _ := localProxy.counts(); now <= accepted {
			t.Fatalf("the addon made no new connection to its apiserver after the reset (%d before, %d after)", accepted, now)
		}
	})

	t.Run("HubCutOffForAWhile", func(t *testing.T) {
		ready, err := readSpoke(ctx, hub, local, c.Name)
		if err != nil {
			t.Fatal(err)
		}
		hubProxy.Cut()
		cutAt := time.Now()
		// The cluster keeps enforcing on its own: the ConfigMap deleted during the cut is put back.
		deleteConfigMap(t, local)
		var during spokeObjects
		fleettest.Eventually(t, cut+time.Minute, func() (bool, string) {
			during, err = readSpoke(ctx, hub, local, c.Name)
			return err == nil && during.configMapVersion == version(2), fmt.Sprintf("the ConfigMap enforced during the cut: %v", err)
		})
		// And keeps answering admission: the webhook and its policy server need no hub.
		if err := admits(ctx, local, true); err == nil || !strings.Contains(err.Error(), "container app is privileged") {
			t.Errorf("a privileged pod during the hub cut: %v, want denied by the policy", err)
		}
		if err := admits(ctx, local, false); err != nil {
			t.Errorf("a plain pod during the hub cut: %v, want admitted", err)
		}
		if _, refused := hubProxy.counts(); refused == 0 {
			t.Logf("no connection attempt to the hub refused yet %s into the cut", time.Since(cutAt).Round(time.Second))
		}
		time.Sleep(time.Until(cutAt.Add(cut)))
		// Still answering at the end of the cut, however long it was.
		if err := admits(ctx, local, true); err == nil || !strings.Contains(err.Error(), "container app is privileged") {
			t.Errorf("a privileged pod at the end of a %s hub cut: %v, want denied by the policy", cut, err)
		}
		if err := admits(ctx, local, false); err != nil {
			t.Errorf("a plain pod at the end of a %s hub cut: %v, want admitted", cut, err)
		}
		hubProxy.Heal()
		healed := time.Now()
		fleettest.Edit(t, hub, root, func(p *policyv1.Policy) {
			p.Spec.PolicyTemplates[0].ObjectDefinition = configMapTemplate(steadyRoot, 3)
		})
		converged(3)
		_, refused := hubProxy.counts()
		t.Logf("hub cut for %s: %d connection attempts refused; the next version enforced and Compliant on the hub %s after the heal",
			cut, refused, time.Since(healed).Round(100*time.Millisecond))
		after, err := readSpoke(ctx, hub, local, c.Name)
		if err != nil {
			t.Fatal(err)
		}
		running()
		if refused == 0 {
			t.Errorf("the addon never tried the hub during a %s cut: the cut was not exercised", cut)
		}
		// Nothing re-created; each spec written once for its one change (v2 → v3).
		if after.replicaUID != before.replicaUID || after.copyUID != before.copyUID || after.templateUID != before.templateUID {
			t.Errorf("objects re-created: hub replica %s→%s, the cluster's copy %s→%s, ConfigurationPolicy %s→%s",
				before.replicaUID, after.replicaUID, before.copyUID, after.copyUID, before.templateUID, after.templateUID)
		}
		if after.configMapUID != during.configMapUID {
			t.Errorf("the ConfigMap re-created after the cut (%s→%s): it should have been updated", during.configMapUID, after.configMapUID)
		}
		if after.copyGeneration != ready.copyGeneration+1 || after.templateGeneration != ready.templateGeneration+1 {
			t.Errorf("specs written more than once for one change: the cluster's copy generation %d→%d, ConfigurationPolicy %d→%d",
				ready.copyGeneration, after.copyGeneration, ready.templateGeneration, after.templateGeneration)
		}
	})
}

// admits creates a pod (dry run: the webhook is called, nothing is stored) and returns the
// apiserver's answer.
func admits(ctx context.Context, local client.Client, privileged bool) error {
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name = "default", "probe"
	pod.Spec.Containers = []corev1.Container{{Name: "app", Image: "nginx:1.27",
		SecurityContext: &corev1.SecurityContext{Privileged: &privileged}}}
	return local.Create(ctx, pod, client.DryRunAll)
}

func deleteConfigMap(t *testing.T, local client.Client) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = "default", steadyRoot
	if err := local.Delete(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
}

// steadySetup places, on every managed cluster, root policy "steady" (a ConfigMap at version 1,
// enforced) and a ClusterAdmissionPolicy denying privileged pods with the Rego at module, served
// by PolicyServer "default"; it returns the root.
func steadySetup(t testing.TB, hub client.Client, module string) *policyv1.Policy {
	t.Helper()
	apply(t, hub, `apiVersion: v1
kind: Namespace
metadata: {name: policies}`, `apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata: {name: steady}
spec: {clusterSelector: {selectorType: LabelSelector, labelSelector: {}}}`, `apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata: {name: steady, namespace: policies}
spec: {clusterSet: steady}`, `apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: everywhere, namespace: policies}
spec: {clusterSets: [steady]}`, `apiVersion: policy.open-cluster-management.io/v1
kind: PlacementBinding
metadata: {name: steady, namespace: policies}
placementRef: {apiGroup: cluster.open-cluster-management.io, kind: Placement, name: everywhere}
subjects:
- {apiGroup: policy.open-cluster-management.io, kind: Policy, name: steady}`, `apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata: {name: no-privileged, namespace: policies}
spec:
  disabled: false
  policy-templates:
  - objectDefinition:
      apiVersion: policies.kubewarden.io/v1
      kind: ClusterAdmissionPolicy
      metadata: {name: no-privileged}
      spec:
        policyServer: default
        module: file://`+module+`
        executionMode: opa
        mode: protect
        rules:
        - {apiGroups: [""], apiVersions: [v1], resources: [pods], operations: [CREATE]}`, `apiVersion: policy.open-cluster-management.io/v1
kind: PlacementBinding
metadata: {name: no-privileged, namespace: policies}
placementRef: {apiGroup: cluster.open-cluster-management.io, kind: Placement, name: everywhere}
subjects:
- {apiGroup: policy.open-cluster-management.io, kind: Policy, name: no-privileged}`)
	root := &policyv1.Policy{}
	root.Namespace, root.Name = "policies", steadyRoot
	root.Spec.RemediationAction = policyv1.Enforce
	root.Spec.PolicyTemplates = []*policyv1.PolicyTemplate{{ObjectDefinition: configMapTemplate(steadyRoot, 1)}}
	if err := hub.Create(context.Background(), root); err != nil {
		t.Fatal(err)
	}
	return root
}
