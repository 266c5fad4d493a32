// Package deploy holds the kustomize bases for the hub and for managed clusters; its test renders
// them with kubectl and has a real apiserver accept every object, in namespaces that enforce Pod
// Security "restricted".
package deploy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	addonapiv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/yaml"

	"regent.dev/regent/addonidentity"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/hub/addon"
	"regent.dev/regent/version"
)

// restricted labels a namespace as the test's user would: enforce and warn Pod Security
// "restricted", so kubectl prints a warning for any workload template that would not comply.
var restricted = map[string]string{
	"pod-security.kubernetes.io/enforce": "restricted",
	"pod-security.kubernetes.io/warn":    "restricted",
}

// podSecurityWarning matches the warning the apiserver returns for a workload whose pods Pod
// Security would reject ("Warning: would violate PodSecurity "restricted:latest": ...").
var podSecurityWarning = regexp.MustCompile(`(?m)^Warning: .*PodSecurity.*$`)

type kubectl struct {
	bin, kubeconfig string
}

// apply runs kubectl apply --server-side with args, first with --dry-run=server, and fails the
// test on an error or on a Pod Security warning in either run.
func (k kubectl) apply(t *testing.T, what string, args ...string) string {
	t.Helper()
	var out string
	for _, dry := range []bool{true, false} {
		cmd := append([]string{"--kubeconfig", k.kubeconfig, "apply", "--server-side", "--force-conflicts"}, args...)
		if dry {
			cmd = append(cmd, "--dry-run=server")
		}
		b, err := exec.Command(k.bin, cmd...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: kubectl %s: %v\n%s", what, strings.Join(cmd[2:], " "), err, b)
		}
		if w := podSecurityWarning.FindAllString(string(b), -1); len(w) > 0 {
			t.Errorf("%s (dry run %t) is not Pod Security restricted:\n%s", what, dry, strings.Join(w, "\n"))
		}
		out = string(b)
	}
	return out
}

func newKubectl(t *testing.T, c *fleet.Cluster) kubectl {
	t.Helper()
	bin, err := fleet.Binary(fleet.DefaultBinDir(), "kubectl")
	if err != nil {
		t.Fatal(err)
	}
	return kubectl{bin: bin, kubeconfig: c.Kubeconfig}
}

func TestKustomizeBases_ApplyToARealClusterUnderRestrictedPodSecurity(t *testing.T) {
	f := fleettest.Start(t, fleet.Options{Managed: []fleet.ClusterSpec{{Name: "cluster1"}}})
	hub := newKubectl(t, f.Hub)
	spoke := newKubectl(t, f.Managed[0])
	// The fleet already has the CRDs; applying them again must be a no-op.
	hub.apply(t, "deploy/crds", "-k", "crds")
	for _, base := range []struct {
		name string
		k    kubectl
		want []string
	}{
		{"hub", hub, []string{"deployment.apps/regent-hub", "service/regent-hub", "poddisruptionbudget.policy/regent-hub",
			"clustermanagementaddon.addon.open-cluster-management.io/regent", "addondeploymentconfig.addon.open-cluster-management.io/regent-default"}},
		{"spoke", spoke, []string{"deployment.apps/regent-spoke-addon", "clusterrole.rbac.authorization.k8s.io/regent-spoke-addon",
			"policyserver.policies.kubewarden.io/default"}},
	} {
		// A server-side dry run needs the namespace its objects go to: the base's own first.
		base.k.apply(t, "deploy/"+base.name+"/namespace.yaml", "-f", filepath.Join(base.name, "namespace.yaml"))
		out := base.k.apply(t, "deploy/"+base.name, "-k", base.name)
		for _, w := range base.want {
			if !strings.Contains(out, w) {
				t.Errorf("deploy/%s applied no %s:\n%s", base.name, w, out)
			}
		}
	}
	ns := map[string]string{"hub": "regent-system", "spoke": addonidentity.DefaultInstallNamespace}
	for base, cluster := range map[string]*fleet.Cluster{"hub": f.Hub, "spoke": f.Managed[0]} {
		assertNamespaceRestricted(t, cluster, ns[base])
		assertPodsAdmitted(t, cluster, ns[base])
	}
}

// The agent the addon manager delivers, rendered for a cluster with a default AddOnDeploymentConfig
// path and applied to that managed cluster's apiserver, into an install namespace that enforces
// "restricted" (OCM's registration agent creates the namespace; a cautious admin labels it).
func TestAgentManifests_ApplyToAManagedClusterUnderRestrictedPodSecurity(t *testing.T) {
	f := fleettest.Start(t, fleet.Options{Managed: []fleet.ClusterSpec{{Name: "cluster1"}}})
	spoke := newKubectl(t, f.Managed[0])
	kube := kubernetes.NewForConfigOrDie(f.Managed[0].Config)
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: addonidentity.DefaultInstallNamespace, Labels: restricted}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The manifests deliver the policy servers' namespace before the agent's Role in it; a
	// server-side dry run creates nothing, so the dry run needs it to exist already.
	// So does the cluster namespace, where the agent's Role for the policy encryption key goes.
	for _, ns := range []string{addonidentity.PolicyServerNamespace, "cluster1"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	cluster := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "cluster1"}}
	mca := &addonapiv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: addonidentity.AddonName, Namespace: "cluster1"}}
	objs, err := addon.AgentManifests(ctx, "", nil, cluster, mca)
	if err != nil {
		t.Fatal(err)
	}
	file := writeManifests(t, objs)
	out := spoke.apply(t, "agent manifests", "-f", file)
	for _, w := range []string{"deployment.apps/regent-spoke-addon", "customresourcedefinition.apiextensions.k8s.io/policies.policy.open-cluster-management.io",
		"policyserver.policies.kubewarden.io/default"} {
		if !strings.Contains(out, w) {
			t.Errorf("agent manifests applied no %s:\n%s", w, out)
		}
	}
	assertPodsAdmitted(t, f.Managed[0], addonidentity.DefaultInstallNamespace)
}

// The check above must be able to fail: a template without the restricted settings draws the
// warning it looks for, and Pod Security enforcement rejects its pod.
func TestPodSecurityCheck_CatchesANonCompliantTemplate(t *testing.T) {
	f := fleettest.Start(t, fleet.Options{})
	kube := kubernetes.NewForConfigOrDie(f.Hub.Config)
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "restricted-check", Labels: restricted}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "lax"}
	lax := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "lax", Namespace: "restricted-check"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: version.Image()}}}}},
	}
	k := newKubectl(t, f.Hub)
	b, err := exec.Command(k.bin, "--kubeconfig", k.kubeconfig, "apply", "--server-side", "--dry-run=server", "-f", writeManifests(t, []runtime.Object{lax})).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !podSecurityWarning.Match(b) {
		t.Errorf("no Pod Security warning for a template without securityContext:\n%s", b)
	}
	if err := createPodFrom(ctx, kube, "restricted-check", "lax", lax.Spec.Template); err == nil {
		t.Error("Pod Security enforcement admitted a pod without securityContext")
	}
}

// assertNamespaceRestricted: the base labelled its own namespace "restricted".
func assertNamespaceRestricted(t *testing.T, c *fleet.Cluster, name string) {
	t.Helper()
	ns, err := kubernetes.NewForConfigOrDie(c.Config).CoreV1().Namespaces().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range restricted {
		if ns.Labels[k] != v {
			t.Errorf("namespace %s: label %s=%q, want %q", name, k, ns.Labels[k], v)
		}
	}
}

// assertPodsAdmitted creates (dry run) the pod of every Deployment in ns, as its ReplicaSet
// would: Pod Security enforcement must admit it. The fleet runs no workload controllers, so this
// is where enforce, not only warn, is exercised.
func assertPodsAdmitted(t *testing.T, c *fleet.Cluster, ns string) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(c.Config)
	ctx := context.Background()
	deploys, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(deploys.Items) == 0 {
		t.Fatalf("no Deployment in %s", ns)
	}
	for _, d := range deploys.Items {
		if !strings.HasSuffix(d.Spec.Template.Spec.Containers[0].Image, ":"+version.Version()) {
			t.Errorf("%s/%s runs %s, not Regent's image at %s", ns, d.Name, d.Spec.Template.Spec.Containers[0].Image, version.Version())
		}
		if err := createPodFrom(ctx, kube, ns, d.Name, d.Spec.Template); err != nil {
			t.Errorf("pod of %s/%s: %v", ns, d.Name, err)
		}
	}
}

func createPodFrom(ctx context.Context, kube kubernetes.Interface, ns, name string, tmpl corev1.PodTemplateSpec) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-probe", Namespace: ns, Labels: tmpl.Labels}, Spec: tmpl.Spec}
	_, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

func writeManifests(t *testing.T, objs []runtime.Object) string {
	t.Helper()
	var buf bytes.Buffer
	for _, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&buf, "---\n%s", b)
	}
	file := filepath.Join(t.TempDir(), "manifests.yaml")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// Every image a manifest names is Regent's at the release version: no ":latest" anywhere.
func TestManifests_NameTheReleaseImage(t *testing.T) {
	// deploy/crds is generated from api/ and names no image (its "image:" are schema fields).
	hubFiles, err := filepath.Glob("hub/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spokeFiles, err := filepath.Glob("spoke/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files := append(hubFiles, spokeFiles...)
	image := regexp.MustCompile(`(?m)^\s*(?:-\s+)?image:\s*(\S+)`)
	var seen int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range image.FindAllSubmatch(b, -1) {
			seen++
			if got := string(m[1]); got != version.Image() {
				t.Errorf("%s names image %s, want %s", f, got, version.Image())
			}
		}
	}
	if seen < 3 {
		t.Errorf("found %d images in deploy/hub and deploy/spoke, want the hub's, the spoke's and the PolicyServer's", seen)
	}
}

// deploy/spoke is the agent the addon delivers, by hand: the same pod and the same RBAC (every
// ClusterRole, Role and binding, with its labels and aggregation rule), so a cluster installed
// either way runs the same thing with the same permissions.
func TestSpokeBase_IsTheDeliveredAgent(t *testing.T) {
	cluster := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "CLUSTER_NAME"}}
	mca := &addonapiv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: addonidentity.AddonName, Namespace: "CLUSTER_NAME"}}
	objs, err := addon.AgentManifests(context.Background(), "", nil, cluster, mca)
	if err != nil {
		t.Fatal(err)
	}
	var delivered *appsv1.Deployment
	deliveredRBAC := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.Deployment:
			delivered = o
		case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *rbacv1.Role, *rbacv1.RoleBinding:
			u := toUnstructured(t, o)
			deliveredRBAC[objectKey(u)] = u
		}
	}
	byHand := &appsv1.Deployment{}
	readYAML(t, "spoke/deployment.yaml", byHand)
	if byHand.Namespace != delivered.Namespace {
		t.Errorf("deploy/spoke/deployment.yaml is in namespace %q, the delivered agent in %q", byHand.Namespace, delivered.Namespace)
	}
	if !equality.Semantic.DeepEqual(byHand.Spec.Template.Spec, delivered.Spec.Template.Spec) {
		t.Errorf("deploy/spoke/deployment.yaml's pod differs from the delivered agent's:\nby hand:   %+v\ndelivered: %+v", byHand.Spec.Template.Spec, delivered.Spec.Template.Spec)
	}
	b, err := os.ReadFile("spoke/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The cluster namespace's RBAC is a file of its own: the kustomization cannot know its name.
	perCluster, err := os.ReadFile("spoke/cluster-namespace.yaml")
	if err != nil {
		t.Fatal(err)
	}
	byHandRBAC := map[string]*unstructured.Unstructured{}
	for _, doc := range strings.Split(string(b)+"\n---\n"+string(perCluster), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if u.GetKind() == "ServiceAccount" || u.GetKind() == "Namespace" || len(u.Object) == 0 {
			continue
		}
		byHandRBAC[objectKey(u)] = u
	}
	if len(deliveredRBAC) < 6 {
		t.Fatalf("the addon delivers %d RBAC objects, want the core and aggregated roles, their members and bindings", len(deliveredRBAC))
	}
	for key, want := range deliveredRBAC {
		got, ok := byHandRBAC[key]
		if !ok {
			t.Errorf("deploy/spoke/rbac.yaml lacks %s", key)
			continue
		}
		for _, field := range []string{"rules", "aggregationRule", "roleRef", "subjects"} {
			if !equality.Semantic.DeepEqual(rbacField(got, field), rbacField(want, field)) {
				t.Errorf("%s %s: deploy/spoke has %v, the addon delivers %v", key, field, got.Object[field], want.Object[field])
			}
		}
		if !equality.Semantic.DeepEqual(got.GetLabels(), want.GetLabels()) {
			t.Errorf("%s labels: deploy/spoke has %v, the addon delivers %v", key, got.GetLabels(), want.GetLabels())
		}
	}
	for key := range byHandRBAC {
		if _, ok := deliveredRBAC[key]; !ok {
			t.Errorf("deploy/spoke/rbac.yaml has %s, which the addon does not deliver", key)
		}
	}
}

// rbacField reads a top-level field, an empty list the same as none (an aggregated role's rules).
func rbacField(u *unstructured.Unstructured, field string) any {
	v := u.Object[field]
	if l, ok := v.([]any); ok && len(l) == 0 {
		return nil
	}
	return v
}

func objectKey(u *unstructured.Unstructured) string {
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}

// toUnstructured gives a typed object the form a YAML file decodes to.
func toUnstructured(t *testing.T, o runtime.Object) *unstructured.Unstructured {
	t.Helper()
	b, err := yaml.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func readYAML(t *testing.T, file string, into any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}
