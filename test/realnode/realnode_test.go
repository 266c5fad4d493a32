package realnode

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"regent.dev/regent/addonidentity"
	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/policyserver/engine"
	"regent.dev/regent/policyserver/lifecycle"
	"regent.dev/regent/policyserver/lifecycle/pull"
	"regent.dev/regent/spoke-addon/admissionpolicy"
)

// noPrivilegedRego refuses privileged containers, with a message the test looks for in the
// apiserver's answer.
const noPrivilegedRego = `package policy

default uid := ""

uid := input.request.uid

deny contains msg if {
	some c in input.request.object.spec.containers
	c.securityContext.privileged == true
	msg := sprintf("privileged container %s refused by regent on a real node", [c.name])
}

default response := {"allowed": true}

response := {"uid": uid, "allowed": false, "status": {"code": 403, "message": concat("; ", sort(deny))}} if count(deny) > 0

main := {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
`

var eventually = fleettest.Eventually

// TestRegentOnARealNode installs Regent as a user does on a fleet running OCM's own agents, one
// cluster with a real node: `regent hub` with its addon manager, and a ManagedClusterAddOn. OCM's
// work agent applies the delivered manifests and OCM's registration agent writes the addon's hub
// credentials from a CSR the hub signs; the spoke addon's Deployment and a PolicyServer's
// StatefulSet run from Regent's image and become Ready through their probes, the addon Available
// through OCM's code; the PolicyServer moves onto ReadWriteOnce claims; a ClusterAdmissionPolicy
// pulled from a registry becomes active and the kube-apiserver, calling the policy server through
// its Service, refuses a privileged pod; the PolicyServer's leader Deployment, as the only
// identity that may read the signing key, signs the module and the replica fetches and verifies
// it; and a root Policy on the hub reaches the cluster through
// the addon in its pod.
func TestRegentOnARealNode(t *testing.T) {
	requireRealNode(t)
	ctx := context.Background()
	// OCM's own registration and work agents: the cluster joins with a bootstrap token, the
	// addon's hub credentials come from a CSR the hub signs, its manifests from a ManifestWork.
	f := fleettest.Start(t, fleet.Options{
		OCMAgents:  true,
		Managed:    []fleet.ClusterSpec{{Name: "cluster1", RealNode: true, Labels: map[string]string{"environment": "dev"}}},
		NodeImages: images, PauseImage: pauseImage,
	})
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, f)
		}
	})
	cluster := f.Cluster("cluster1")
	local := newClient(t, cluster)
	hub := newClient(t, f.Hub)

	// The hub side as README installs it: deploy/hub applied to the hub. Its Deployment has no
	// node to run on there, so `regent hub` runs on the host with exactly the Deployment's
	// arguments (listeners aside) as its ServiceAccount: deploy/hub's RBAC is what it gets.
	if _, err := f.StartPlacementController(""); err != nil {
		t.Fatal(err)
	}
	hubArgs := installHub(t, f)
	if _, err := f.StartProcess("regent-hub", regentBin, hubArgs...); err != nil {
		t.Fatal(err)
	}

	// The spoke side, enabled as a user does: a ManagedClusterAddOn in the cluster's namespace.
	ns := addonidentity.DefaultInstallNamespace
	create(t, hub, &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: addonidentity.AddonName, Namespace: cluster.Name}})
	t.Run("TheAddonIsDeliveredByOCMsAgentsAndBecomesAvailable", func(t *testing.T) {
		// The Deployment arrives through OCM's work agent, and its hub kubeconfig Secret
		// through OCM's registration agent (a CSR the hub's signer signed).
		eventually(t, 4*time.Minute, func() (bool, string) {
			secret := &corev1.Secret{}
			if err := local.Get(ctx, types.NamespacedName{Namespace: ns, Name: addonidentity.HubKubeconfigSecret}, secret); err != nil {
				return false, "hub kubeconfig Secret: " + err.Error()
			}
			return len(secret.Data["tls.crt"]) > 0, "the Secret holds no signed certificate yet"
		})
		waitDeploymentReady(t, local, ns, "regent-spoke-addon")
		// OCM's registration agent turns the Lease the addon renews from its pod into Available.
		eventually(t, 3*time.Minute, func() (bool, string) {
			mca := &addonv1alpha1.ManagedClusterAddOn{}
			if err := hub.Get(ctx, types.NamespacedName{Namespace: cluster.Name, Name: addonidentity.AddonName}, mca); err != nil {
				return false, err.Error()
			}
			return meta.IsStatusConditionTrue(mca.Status.Conditions, addonv1alpha1.ManagedClusterAddOnConditionAvailable),
				fmt.Sprintf("addon conditions %+v", mca.Status.Conditions)
		})
	})
	waitDeploymentReady(t, local, ns, "regent-spoke-addon")
	t.Run("TheAddonInItsPodRenewsItsLease", func(t *testing.T) {
		// Its ServiceAccount's token is projected into the pod (the ServiceAccount admission
		// plugin and the token and root CA controllers at work) and is what the addon's in-cluster
		// client, bound by the delivered RBAC, renews the Lease with.
		pods := &corev1.PodList{}
		if err := local.List(ctx, pods, client.InNamespace(ns)); err != nil || len(pods.Items) != 1 {
			t.Fatalf("addon pods: %v (%d)", err, len(pods.Items))
		}
		projected := false
		for _, v := range pods.Items[0].Spec.Volumes {
			if v.Projected != nil {
				for _, src := range v.Projected.Sources {
					projected = projected || src.ServiceAccountToken != nil
				}
			}
		}
		if !projected {
			t.Fatalf("the addon pod has no projected ServiceAccount token: %+v", pods.Items[0].Spec.Volumes)
		}
		eventually(t, 2*time.Minute, func() (bool, string) {
			lease := &coordinationv1.Lease{}
			if err := local.Get(ctx, types.NamespacedName{Namespace: ns, Name: addonidentity.AddonName}, lease); err != nil {
				return false, "addon lease: " + err.Error()
			}
			return lease.Spec.RenewTime != nil && time.Since(lease.Spec.RenewTime.Time) < time.Minute, "lease not renewed"
		})
	})

	// The delivered default PolicyServer, from Regent's image, its cache on the node's storage.
	t.Run("ThePolicyServerStatefulSetBecomesReady", func(t *testing.T) {
		eventually(t, 4*time.Minute, func() (bool, string) {
			sts := &appsv1.StatefulSet{}
			if err := local.Get(ctx, types.NamespacedName{Namespace: admissionpolicy.DefaultNamespace, Name: "regent-policy-server-default"}, sts); err != nil {
				return false, "statefulset: " + err.Error() + "; " + podsSummary(ctx, local, admissionpolicy.DefaultNamespace)
			}
			return sts.Status.ReadyReplicas == 1, fmt.Sprintf("statefulset ready %d/1; %s", sts.Status.ReadyReplicas,
				podsSummary(ctx, local, admissionpolicy.DefaultNamespace))
		})
		// Ready through its HTTPS readiness probe, its signed cache in an emptyDir (no storage
		// class named). Then on storage that offers only ReadWriteOnce, as most clusters have:
		// a claim per replica, the StatefulSet replaced with its pods, Ready again.
		ps := &kubewardenv1.PolicyServer{}
		if err := local.Get(ctx, types.NamespacedName{Name: "default"}, ps); err != nil {
			t.Fatal(err)
		}
		class := fleet.NodeStorageClass
		ps.Spec.CacheStorageClassName = &class
		if err := local.Update(ctx, ps); err != nil {
			t.Fatal(err)
		}
		eventually(t, 4*time.Minute, func() (bool, string) {
			claims := &corev1.PersistentVolumeClaimList{}
			if err := local.List(ctx, claims, client.InNamespace(admissionpolicy.DefaultNamespace)); err != nil {
				return false, err.Error()
			}
			if len(claims.Items) != 1 || claims.Items[0].Status.Phase != corev1.ClaimBound ||
				!slices.Equal(claims.Items[0].Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
				return false, fmt.Sprintf("want one bound ReadWriteOnce claim, have %d; %s", len(claims.Items), podsSummary(ctx, local, admissionpolicy.DefaultNamespace))
			}
			sts := &appsv1.StatefulSet{}
			if err := local.Get(ctx, types.NamespacedName{Namespace: admissionpolicy.DefaultNamespace, Name: "regent-policy-server-default"}, sts); err != nil {
				return false, err.Error()
			}
			return len(sts.Spec.VolumeClaimTemplates) == 1 && sts.Status.ReadyReplicas == 1 && sts.Status.UpdatedReplicas == 1,
				fmt.Sprintf("statefulset claims %d ready %d updated %d; %s", len(sts.Spec.VolumeClaimTemplates),
					sts.Status.ReadyReplicas, sts.Status.UpdatedReplicas, podsSummary(ctx, local, admissionpolicy.DefaultNamespace))
		})
	})

	// The policy's module comes from a registry pods reach on the node address.
	module := pushModule(t)
	fail := admissionregistrationv1.Fail
	create(t, local, &kubewardenv1.ClusterAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-privileged"},
		Spec: kubewardenv1.ClusterAdmissionPolicySpec{PolicySpec: kubewardenv1.PolicySpec{
			PolicyServer: "default", Module: module, ExecutionMode: "opa", Mode: kubewardenv1.ModeProtect,
			FailurePolicy: &fail,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"regent-e2e": "admission"}},
		}},
	})
	create(t, local, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "workloads", Labels: map[string]string{"regent-e2e": "admission"}}})
	t.Run("TheApiserverCallsThePolicyServerThroughItsService", func(t *testing.T) {
		privileged := func(name string, priv bool) *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "workloads"}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "app", Image: regentImage, ImagePullPolicy: corev1.PullIfNotPresent,
					Args: []string{"version"}, SecurityContext: &corev1.SecurityContext{Privileged: &priv}}},
				RestartPolicy: corev1.RestartPolicyNever}}
		}
		eventually(t, 3*time.Minute, func() (bool, string) {
			err := local.Create(ctx, privileged("privileged", true))
			if err == nil {
				_ = local.Delete(ctx, privileged("privileged", true))
				return false, "privileged pod admitted: the policy is not active yet; " + policyStatus(ctx, local)
			}
			return strings.Contains(err.Error(), "privileged container app refused by regent on a real node"),
				"refused, but not by the policy: " + err.Error()
		})
		// The webhook names the policy server's Service, not a URL: the kube-apiserver resolved it
		// (to the pod's endpoint, --enable-aggregator-routing) for the refusal above.
		hooks := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
		if err := local.List(ctx, hooks); err != nil {
			t.Fatal(err)
		}
		viaService := 0
		for _, h := range hooks.Items {
			for _, w := range h.Webhooks {
				if w.ClientConfig.URL != nil {
					t.Errorf("webhook %s calls URL %s, not a Service", w.Name, *w.ClientConfig.URL)
				}
				if w.ClientConfig.Service != nil {
					viaService++
				}
			}
		}
		if viaService == 0 {
			t.Fatal("no webhook calls a Service")
		}
		if err := local.Create(ctx, privileged("unprivileged", false)); err != nil {
			t.Fatalf("an unprivileged pod is refused: %v", err)
		}
		// The admitted pod runs on the node from Regent's image.
		eventually(t, 2*time.Minute, func() (bool, string) {
			p := &corev1.Pod{}
			if err := local.Get(ctx, types.NamespacedName{Namespace: "workloads", Name: "unprivileged"}, p); err != nil {
				return false, err.Error()
			}
			return p.Status.Phase == corev1.PodSucceeded, fmt.Sprintf("pod %s: %s", p.Status.Phase, p.Status.Message)
		})
	})

	t.Run("TheReplicaVerifiedTheEntryItFetchedFromTheLeaderWorkload", func(t *testing.T) {
		// The leader runs as a Deployment of its own, as the leader ServiceAccount that alone
		// reads the signing key; the replica's report on the revision says where its entry came
		// from: fetched from that leader and verified, not compiled by the replica.
		waitLeaderWorkload(t, local)
		eventually(t, 3*time.Minute, func() (bool, string) {
			rev := &kubewardenv1.PolicyRevision{}
			if err := local.Get(ctx, types.NamespacedName{Namespace: admissionpolicy.DefaultNamespace, Name: "clusterwide-no-privileged-g1"}, rev); err != nil {
				return false, err.Error()
			}
			b, _ := yaml.Marshal(rev.Status)
			var initialized bool
			for _, c := range rev.Status.Conditions {
				initialized = initialized || (c.Type == kubewardenv1.ConditionInitialized && c.Status == metav1.ConditionTrue && c.Reason == lifecycle.ReasonInitialized)
			}
			if !initialized || rev.Status.CacheKey == "" || len(rev.Status.Replicas) != 1 {
				return false, "want Initialized with a signed entry and one replica's report: " + string(b)
			}
			rs := rev.Status.Replicas[0]
			return rs.Ready == metav1.ConditionTrue && rs.Reason == lifecycle.ReasonLoaded && strings.Contains(rs.Message, "fetched from the leader"),
				"want the replica Ready from the entry fetched from the leader: " + string(b)
		})
		lease := &coordinationv1.Lease{}
		if err := local.Get(ctx, types.NamespacedName{Namespace: admissionpolicy.DefaultNamespace, Name: lifecycle.LeaderLeaseName("default")}, lease); err != nil ||
			lease.Spec.HolderIdentity == nil || !strings.HasPrefix(*lease.Spec.HolderIdentity, "leader_") {
			t.Errorf("leader Lease %+v (%v): want held by the leader workload", lease.Spec, err)
		}
	})

	t.Run("ARootPolicyOnTheHubReachesTheClusterThroughTheAddonInItsPod", func(t *testing.T) {
		apply(t, hub, `apiVersion: v1
kind: Namespace
metadata: {name: policies}`, `apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata: {name: realnode}
spec: {clusterSelector: {selectorType: LabelSelector, labelSelector: {}}}`, `apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata: {name: realnode, namespace: policies}
spec: {clusterSet: realnode}`, `apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: dev, namespace: policies}
spec:
  clusterSets: [realnode]
  predicates:
  - requiredClusterSelector: {labelSelector: {matchLabels: {environment: dev}}}`, `apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata: {name: node-marker, namespace: policies}
spec:
  disabled: false
  remediationAction: enforce
  policy-templates:
  - objectDefinition:
      apiVersion: policy.open-cluster-management.io/v1
      kind: ConfigurationPolicy
      metadata: {name: node-marker}
      spec:
        remediationAction: inform
        severity: low
        object-templates:
        - complianceType: musthave
          objectDefinition:
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: node-marker, namespace: default}
            data: {from: hub}`, `apiVersion: policy.open-cluster-management.io/v1
kind: PlacementBinding
metadata: {name: node-marker, namespace: policies}
placementRef: {apiGroup: cluster.open-cluster-management.io, kind: Placement, name: dev}
subjects:
- {apiGroup: policy.open-cluster-management.io, kind: Policy, name: node-marker}`)
		eventually(t, 3*time.Minute, func() (bool, string) {
			cm := &corev1.ConfigMap{}
			if err := local.Get(ctx, types.NamespacedName{Namespace: "default", Name: "node-marker"}, cm); err != nil {
				return false, "the policy's ConfigMap on the cluster: " + err.Error()
			}
			return cm.Data["from"] == "hub", fmt.Sprintf("ConfigMap data %v", cm.Data)
		})
	})
}

// pushModule compiles the policy to wasm and pushes it as a Kubewarden policy artifact to a
// registry served on the node address (plain http, which go-containerregistry allows for a
// private address), returning its registry:// reference.
func pushModule(t *testing.T) string {
	t.Helper()
	wasm, err := engine.CompileRego(context.Background(), map[string]string{"policy.rego": noPrivilegedRego}, "policy/main", false)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(fleet.NodeAddress, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: static.NewLayer(wasm, pull.WasmLayerMediaType)})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(ln.Addr().String() + "/policies/no-privileged:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	return "registry://" + ref.String()
}

// waitDeploymentReady waits until the Deployment's one replica is Ready and has not restarted
// (a Deployment without a readiness probe is Ready as soon as its container starts).
func waitDeploymentReady(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	eventually(t, 4*time.Minute, func() (bool, string) {
		d := &appsv1.Deployment{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
			return false, err.Error()
		}
		pods := &corev1.PodList{}
		if err := c.List(context.Background(), pods, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.RestartCount > 0 {
					t.Fatalf("pod %s restarted: %s", p.Name, podsSummary(context.Background(), c, ns))
				}
			}
		}
		return d.Status.ReadyReplicas == 1, fmt.Sprintf("deployment %s ready %d/1; %s", name, d.Status.ReadyReplicas,
			podsSummary(context.Background(), c, ns))
	})
}

// waitLeaderWorkload waits until the default PolicyServer's leader Deployment has its pod
// Ready, as the leader ServiceAccount, and the PolicyServer says so.
func waitLeaderWorkload(t *testing.T, c client.Client) {
	t.Helper()
	ns := admissionpolicy.DefaultNamespace
	eventually(t, 4*time.Minute, func() (bool, string) {
		d := &appsv1.Deployment{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "regent-policy-server-default-leader"}, d); err != nil {
			return false, "leader Deployment: " + err.Error()
		}
		if sa := d.Spec.Template.Spec.ServiceAccountName; sa != "regent-policy-server-default-leader" {
			t.Fatalf("the leader runs as %q", sa)
		}
		ps := &kubewardenv1.PolicyServer{}
		if err := c.Get(context.Background(), types.NamespacedName{Name: "default"}, ps); err != nil {
			return false, err.Error()
		}
		return d.Status.ReadyReplicas == 1 && meta.IsStatusConditionTrue(ps.Status.Conditions, "LeaderReady"),
			fmt.Sprintf("leader ready %d/1, PolicyServer conditions %+v; %s", d.Status.ReadyReplicas, ps.Status.Conditions, podsSummary(context.Background(), c, ns))
	})
}

// podsSummary says what each pod of ns waits for, so a timeout names the reason.
func podsSummary(ctx context.Context, c client.Client, ns string) string {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range pods.Items {
		s := fmt.Sprintf("%s %s", p.Name, p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			s += fmt.Sprintf(" ready=%v restarts=%d", cs.Ready, cs.RestartCount)
			if w := cs.State.Waiting; w != nil {
				s += " waiting " + w.Reason + ": " + w.Message
			}
			if l := cs.LastTerminationState.Terminated; l != nil {
				s += fmt.Sprintf(" last exit %d %s", l.ExitCode, l.Message)
			}
		}
		for _, cond := range p.Status.Conditions {
			if cond.Status != corev1.ConditionTrue && cond.Message != "" {
				s += " " + string(cond.Type) + ": " + cond.Message
			}
		}
		out = append(out, s)
	}
	return fmt.Sprintf("pods in %s: [%s]", ns, strings.Join(out, "; "))
}

func policyStatus(ctx context.Context, c client.Client) string {
	p := &kubewardenv1.ClusterAdmissionPolicy{}
	if err := c.Get(ctx, types.NamespacedName{Name: "no-privileged"}, p); err != nil {
		return err.Error()
	}
	b, _ := yaml.Marshal(p.Status)
	return "policy status: " + string(b)
}

func newClient(t *testing.T, c *fleet.Cluster) client.Client {
	t.Helper()
	cl, err := client.New(c.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func apply(t *testing.T, c client.Client, docs ...string) {
	t.Helper()
	for _, doc := range docs {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		create(t, c, obj)
	}
}

// dumpLogs shows the tail of the node's, the controllers' and Regent's logs, and the pods' own.
func dumpLogs(t *testing.T, f *fleet.Fleet) {
	fleettest.DumpLogs(t, f.Dir, 3000, "logs/regent-*.log", "cluster1/node/logs/*.log",
		"cluster1/logs/kube-controller-manager.log", "cluster1/node/pod-logs/*/*/*.log")
}

// installHub applies deploy/hub to the fleet's hub as a user does and returns the arguments of
// its Deployment's container, run as the Deployment's ServiceAccount from a kubeconfig on the host,
// with its listeners off (several fleets share this host).
func installHub(t *testing.T, f *fleet.Fleet) []string {
	t.Helper()
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	deployHub := filepath.Join(strings.TrimSpace(string(root)), "deploy", "hub")
	kubectl, err := fleet.Binary(fleet.DefaultBinDir(), "kubectl")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(kubectl, "--kubeconfig", f.Hub.Kubeconfig, "apply", "--server-side", "--force-conflicts", "-k", deployHub).CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply -k deploy/hub: %v\n%s", err, out)
	}
	rendered, err := exec.Command(kubectl, "kustomize", deployHub).Output()
	if err != nil {
		t.Fatal(err)
	}
	var deployment *appsv1.Deployment
	for _, doc := range strings.Split(string(rendered), "\n---\n") {
		if strings.Contains(doc, "kind: Deployment\n") {
			deployment = &appsv1.Deployment{}
			if err := yaml.Unmarshal([]byte(doc), deployment); err != nil {
				t.Fatal(err)
			}
		}
	}
	if deployment == nil {
		t.Fatal("deploy/hub has no Deployment")
	}
	pod := deployment.Spec.Template.Spec
	if pod.Containers[0].Image != regentImage {
		t.Fatalf("deploy/hub runs %s, the node has %s", pod.Containers[0].Image, regentImage)
	}
	kube, err := kubernetes.NewForConfig(f.Hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	ttl := int64(3600)
	token, err := kube.CoreV1().ServiceAccounts(deployment.Namespace).CreateToken(context.Background(), pod.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "regent-hub.kubeconfig")
	if err := fleet.WriteKubeconfig(kubeconfig, &rest.Config{Host: f.Hub.Config.Host, BearerToken: token.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: f.Hub.Config.CAData}}); err != nil {
		t.Fatal(err)
	}
	args := []string{"--kubeconfig", kubeconfig}
	for _, a := range pod.Containers[0].Args {
		switch {
		case strings.HasPrefix(a, "--metrics-bind-address="):
			a = "--metrics-bind-address=0"
		case strings.HasPrefix(a, "--health-probe-bind-address="):
			a = "--health-probe-bind-address="
		}
		args = append(args, a)
	}
	return args
}
