package ocminstall

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	spokeaddon "regent.dev/regent/spoke-addon"
)

// TestOCMAgentsInstall runs OCM's own registration, work and addon components on a fleet and
// installs Regent on it as a user would: the cluster joins with a bootstrap token and a CSR the
// hub signs, ManifestWorks are applied by OCM's work agent, Regent's addon gets its hub
// certificate from OCM's registration agent, its Lease makes the addon Available through OCM's
// code, and a policy placed on the cluster becomes compliant through that identity.
func TestOCMAgentsInstall(t *testing.T) {
	f := fleettest.Start(t, fleet.Options{OCMAgents: true,
		Managed: []fleet.ClusterSpec{{Name: "c1", Labels: map[string]string{"environment": "dev"}}}})
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, f)
		}
	})
	ctx := context.Background()
	c1 := f.Cluster("c1")
	hub, spoke := newClient(t, f.Hub), newClient(t, c1)
	hubKube, err := kubernetes.NewForConfig(f.Hub.Config)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("ClusterJoinedWithBootstrapTokenAndSignedCSR", func(t *testing.T) {
		mc := &clusterv1.ManagedCluster{}
		if err := hub.Get(ctx, types.NamespacedName{Name: "c1"}, mc); err != nil {
			t.Fatal(err)
		}
		for _, cond := range []string{clusterv1.ManagedClusterConditionHubAccepted, clusterv1.ManagedClusterConditionJoined,
			clusterv1.ManagedClusterConditionAvailable} {
			if !meta.IsStatusConditionTrue(mc.Status.Conditions, cond) {
				t.Errorf("ManagedCluster c1 condition %s not True: %+v", cond, mc.Status.Conditions)
			}
		}
		if !mc.Spec.HubAcceptsClient || mc.Labels["environment"] != "dev" {
			t.Errorf("ManagedCluster c1 not accepted with its labels: %+v %v", mc.Spec, mc.Labels)
		}
		if len(mc.Spec.ManagedClusterClientConfigs) != 1 || mc.Spec.ManagedClusterClientConfigs[0].URL != c1.Config.Host {
			t.Errorf("managedClusterClientConfigs %+v, want the spoke apiserver %s", mc.Spec.ManagedClusterClientConfigs, c1.Config.Host)
		}
		// The agent's CSR was made with the bootstrap ServiceAccount's token, approved, and signed by
		// the hub's kube-controller-manager.
		csrs, err := hubKube.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{
			LabelSelector: clusterv1.ClusterNameLabelKey + "=c1,!" + addonv1alpha1.AddonLabelKey})
		if err != nil || len(csrs.Items) == 0 {
			t.Fatalf("registration CSRs of c1: %v (%d)", err, len(csrs.Items))
		}
		csr := csrs.Items[0]
		bootstrapUser := "system:serviceaccount:" + fleet.OCMBootstrapNamespace + ":" + fleet.OCMBootstrapServiceAccount
		if csr.Spec.Username != bootstrapUser || csr.Spec.SignerName != certificatesv1.KubeAPIServerClientSignerName {
			t.Errorf("CSR %s from %q for signer %q, want %q and %q", csr.Name, csr.Spec.Username, csr.Spec.SignerName,
				bootstrapUser, certificatesv1.KubeAPIServerClientSignerName)
		}
		cert := parseCert(t, csr.Status.Certificate)
		if !strings.HasPrefix(cert.Subject.CommonName, "system:open-cluster-management:c1:") {
			t.Errorf("signed certificate for %q", cert.Subject.CommonName)
		}
		// The agent's hub kubeconfig authenticates to the hub as that certificate's subject.
		user := whoAmI(t, filepath.Join(c1.OCMHubKubeconfigDir(), "kubeconfig"))
		if user.Username != cert.Subject.CommonName {
			t.Errorf("agent's hub identity %q, certificate %q", user.Username, cert.Subject.CommonName)
		}
		secret := &corev1.Secret{}
		if err := spoke.Get(ctx, types.NamespacedName{Namespace: fleet.OCMAgentNamespace, Name: fleet.OCMHubKubeconfigSecret}, secret); err != nil {
			t.Errorf("agent's hub kubeconfig Secret on the spoke: %v", err)
		}
	})

	t.Run("ManifestWorkAppliedByWorkAgent", func(t *testing.T) {
		apply(t, hub, `apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {name: hello, namespace: c1}
spec:
  workload:
    manifests:
    - apiVersion: v1
      kind: ConfigMap
      metadata: {name: hello, namespace: default}
      data: {from: ocm-work-agent}`)
		eventually(t, 2*time.Minute, func() (bool, string) {
			cm := &corev1.ConfigMap{}
			if err := spoke.Get(ctx, types.NamespacedName{Namespace: "default", Name: "hello"}, cm); err != nil {
				return false, "ConfigMap on the spoke: " + err.Error()
			}
			return cm.Data["from"] == "ocm-work-agent", fmt.Sprintf("ConfigMap data %v", cm.Data)
		})
		eventually(t, 2*time.Minute, func() (bool, string) {
			mw := &unstructured.Unstructured{}
			mw.SetAPIVersion("work.open-cluster-management.io/v1")
			mw.SetKind("ManifestWork")
			if err := hub.Get(ctx, types.NamespacedName{Namespace: "c1", Name: "hello"}, mw); err != nil {
				return false, err.Error()
			}
			conds, _, _ := unstructured.NestedSlice(mw.Object, "status", "conditions")
			return conditionTrue(conds, "Applied") && conditionTrue(conds, "Available"), fmt.Sprintf("ManifestWork conditions %v", conds)
		})
	})

	// Regent's hub with its addon manager, and the addon enabled on c1 as `clusteradm addon
	// enable` does.
	if _, err := f.StartProcess("regent-hub", regentBin, "hub", "--kubeconfig", f.Hub.Kubeconfig, "--metrics-bind-address", "0"); err != nil {
		t.Fatal(err)
	}
	apply(t, hub, `apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ManagedClusterAddOn
metadata: {name: regent, namespace: c1}
spec: {installNamespace: `+fleet.OCMAddonNamespace+`}`)
	addonKubeconfig := filepath.Join(t.TempDir(), "hub")

	t.Run("AddonHubCertificateFromOCMRegistration", func(t *testing.T) {
		secret := &corev1.Secret{}
		eventually(t, 3*time.Minute, func() (bool, string) {
			err := spoke.Get(ctx, types.NamespacedName{Namespace: fleet.OCMAddonNamespace, Name: spokeaddon.AddonName + "-hub-kubeconfig"}, secret)
			if err != nil {
				return false, "addon hub kubeconfig Secret: " + err.Error()
			}
			return len(secret.Data["kubeconfig"]) > 0 && len(secret.Data["tls.crt"]) > 0,
				fmt.Sprintf("Secret keys %v", slices.Collect(maps.Keys(secret.Data)))
		})
		// As the pod mounts it: every key a file in one folder.
		if err := os.MkdirAll(addonKubeconfig, 0o700); err != nil {
			t.Fatal(err)
		}
		for k, v := range secret.Data {
			if err := os.WriteFile(filepath.Join(addonKubeconfig, k), v, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		cert := parseCert(t, secret.Data["tls.crt"])
		// Issued through a CSR of the addon that addon-framework approved and the hub signed.
		csrs, err := hubKube.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{
			LabelSelector: clusterv1.ClusterNameLabelKey + "=c1," + addonv1alpha1.AddonLabelKey + "=" + spokeaddon.AddonName})
		if err != nil {
			t.Fatal(err)
		}
		signed := false
		for _, csr := range csrs.Items {
			signed = signed || (len(csr.Status.Certificate) > 0 && parseCert(t, csr.Status.Certificate).SerialNumber.Cmp(cert.SerialNumber) == 0)
		}
		if !signed {
			t.Errorf("no signed addon CSR among %d issued the Secret's certificate", len(csrs.Items))
		}
		user := whoAmI(t, filepath.Join(addonKubeconfig, "kubeconfig"))
		if user.Username != cert.Subject.CommonName || !slices.Contains(user.Groups, "system:open-cluster-management:cluster:c1:addon:regent") {
			t.Errorf("addon's hub identity %q %v, certificate %q", user.Username, user.Groups, cert.Subject.CommonName)
		}
		// The agent manifests reached the spoke through OCM's work agent.
		eventually(t, time.Minute, func() (bool, string) {
			d := &unstructured.Unstructured{}
			d.SetAPIVersion("apps/v1")
			d.SetKind("Deployment")
			err := spoke.Get(ctx, types.NamespacedName{Namespace: fleet.OCMAddonNamespace, Name: "regent-spoke-addon"}, d)
			return err == nil, fmt.Sprintf("spoke-addon Deployment delivered by ManifestWork: %v", err)
		})
	})

	t.Run("AddonLeaseMakesItAvailableThroughOCM", func(t *testing.T) {
		if _, err := f.StartProcess("regent-spoke-addon-c1", regentBin, "spoke-addon",
			"--hub-kubeconfig", filepath.Join(addonKubeconfig, "kubeconfig"), "--kubeconfig", c1.Kubeconfig,
			"--cluster-name", "c1", "--install-namespace", fleet.OCMAddonNamespace, "--metrics-bind-address", "0"); err != nil {
			t.Fatal(err)
		}
		eventually(t, 3*time.Minute, func() (bool, string) {
			mca := &addonv1alpha1.ManagedClusterAddOn{}
			if err := hub.Get(ctx, types.NamespacedName{Namespace: "c1", Name: spokeaddon.AddonName}, mca); err != nil {
				return false, err.Error()
			}
			c := meta.FindStatusCondition(mca.Status.Conditions, addonv1alpha1.ManagedClusterAddOnConditionAvailable)
			// OCM's registration agent sets this reason when it sees the addon's Lease renewed.
			return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "ManagedClusterAddOnLeaseUpdated",
				fmt.Sprintf("addon conditions %+v", mca.Status.Conditions)
		})
	})

	t.Run("PlacedPolicyCompliantThroughAddonIdentity", func(t *testing.T) {
		if _, err := f.StartPlacementController(""); err != nil {
			t.Fatal(err)
		}
		apply(t, hub, `apiVersion: v1
kind: Namespace
metadata: {name: policies}`, `apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata: {name: ocm-install}
spec: {clusterSelector: {selectorType: LabelSelector, labelSelector: {}}}`, `apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata: {name: ocm-install, namespace: policies}
spec: {clusterSet: ocm-install}`, `apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: dev, namespace: policies}
spec:
  clusterSets: [ocm-install]
  predicates:
  - requiredClusterSelector: {labelSelector: {matchLabels: {environment: dev}}}`, `apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata: {name: installed, namespace: policies}
spec:
  disabled: false
  remediationAction: enforce
  policy-templates:
  - objectDefinition:
      apiVersion: policy.open-cluster-management.io/v1
      kind: ConfigurationPolicy
      metadata: {name: installed}
      spec:
        remediationAction: inform
        severity: low
        object-templates:
        - complianceType: musthave
          objectDefinition: {apiVersion: v1, kind: Namespace, metadata: {name: ocm-installed}}`, `apiVersion: policy.open-cluster-management.io/v1
kind: PlacementBinding
metadata: {name: installed, namespace: policies}
placementRef: {apiGroup: cluster.open-cluster-management.io, kind: Placement, name: dev}
subjects:
- {apiGroup: policy.open-cluster-management.io, kind: Policy, name: installed}`)
		eventually(t, 3*time.Minute, func() (bool, string) {
			root := &policyv1.Policy{}
			if err := hub.Get(ctx, types.NamespacedName{Namespace: "policies", Name: "installed"}, root); err != nil {
				return false, err.Error()
			}
			return root.Status.ComplianceState == policyv1.Compliant, fmt.Sprintf("root status %+v", root.Status)
		})
		if err := spoke.Get(ctx, types.NamespacedName{Name: "ocm-installed"}, &corev1.Namespace{}); err != nil {
			t.Errorf("namespace the policy enforces on c1: %v", err)
		}
		// The replica's status was written by the addon with its OCM-issued identity.
		replica := &policyv1.Policy{}
		if err := hub.Get(ctx, client.ObjectKey{Namespace: "c1", Name: "policies.installed"}, replica); err != nil {
			t.Fatal(err)
		}
		if replica.Status.ComplianceState != policyv1.Compliant {
			t.Errorf("replica on c1 %q", replica.Status.ComplianceState)
		}
	})
}

func parseCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("no PEM certificate in %q", data)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// whoAmI asks the hub who the kubeconfig at path authenticates as.
func whoAmI(t *testing.T, path string) authenticationv1.UserInfo {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("authenticate to the hub with %s: %v", path, err)
	}
	return review.Status.UserInfo
}

func conditionTrue(conds []any, typ string) bool {
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}
