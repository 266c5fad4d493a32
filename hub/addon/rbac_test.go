package addon_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"open-cluster-management.io/addon-framework/pkg/agent"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	policyv1beta1 "regent.dev/regent/api/policy/v1beta1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/hub"
	"regent.dev/regent/hub/addon"
)

// hubNamespace is where deploy/hub installs the hub (its kustomization's namespace).
const hubNamespace = "regent-system"

// The hub's processes, the propagator and the addon manager, do their work with exactly the RBAC
// deploy/hub/rbac.yaml grants its ServiceAccount, and that identity can do nothing beyond it that
// would matter: read Secrets, escalate or bind a Role, approve a CSR for another signer.
func TestHubRBAC_TheHubWorksWithDeployRBACAndIsForbiddenBeyondIt(t *testing.T) {
	f := fleettest.Start(t, fleet.Options{Managed: []fleet.ClusterSpec{{Name: "cluster1"}}})
	if err := workv1.Install(scheme.Scheme); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	admin := newClient(t, f.Hub.Config)
	for _, ns := range []string{hubNamespace, "team1"} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	applyManifests(t, admin, "../../deploy/hub/rbac.yaml")
	identity := serviceAccountConfig(t, f.Hub.Config, hubNamespace, "regent-hub")

	mgr, err := hub.NewManager(identity, hub.Options{MetricsBindAddress: "0", LeaderElection: true, LeaderElectionNamespace: hubNamespace})
	if err != nil {
		t.Fatal(err)
	}
	fleettest.StartManager(t, mgr)
	done := make(chan error, 1)
	go func() {
		done <- addon.Run(ctx, identity, addon.Options{Image: "example.com/regent:test", LeaderElection: true, LeaderElectionNamespace: hubNamespace})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("addon manager: %v", err)
		}
	})

	// A root propagates: its replica is written with the rollout status the hub applies.
	root := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team1"},
		Spec: policyv1.PolicySpec{RemediationAction: policyv1.Inform, PolicyTemplates: []*policyv1.PolicyTemplate{{
			ObjectDefinition: runtime.RawExtension{Raw: []byte(`{"apiVersion":"policy.open-cluster-management.io/v1","kind":"ConfigurationPolicy","metadata":{"name":"p"},"spec":{"severity":"low","object-templates":[]}}`)}}}}}
	binding := &policyv1.PlacementBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "team1"},
		PlacementRef: policyv1.PlacementSubject{APIGroup: clusterv1beta1.GroupName, Kind: "Placement", Name: "pl"},
		Subjects:     []policyv1.Subject{{APIGroup: policyv1.GroupVersion.Group, Kind: "Policy", Name: "p"}}}
	decision := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Name: "pl-decision-0", Namespace: "team1",
		Labels: map[string]string{clusterv1beta1.PlacementLabel: "pl", clusterv1beta1.DecisionGroupIndexLabel: "0"}}}
	for _, o := range []client.Object{root, binding, decision} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	decision.Status.Decisions = []clusterv1beta1.ClusterDecision{{ClusterName: "cluster1"}}
	if err := admin.Status().Update(ctx, decision); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() (bool, string) {
		rep := &policyv1.Policy{}
		err := admin.Get(ctx, client.ObjectKey{Namespace: "cluster1", Name: "team1.p"}, rep)
		return err == nil && rep.EffectiveRolloutStatus() == policyv1.RolloutProgressing, fmt.Sprintf("replica: %v %q", err, rep.EffectiveRolloutStatus())
	})
	eventually(t, time.Minute, func() (bool, string) {
		got := &policyv1.Policy{}
		err := admin.Get(ctx, client.ObjectKeyFromObject(root), got)
		return err == nil && len(got.Status.Status) == 1, fmt.Sprintf("root status: %v %+v", err, got.Status)
	})
	// A PolicySet of that root gets its status (the set controller patches policysets/status).
	set := &policyv1beta1.PolicySet{ObjectMeta: metav1.ObjectMeta{Name: "set", Namespace: "team1"},
		Spec: policyv1beta1.PolicySetSpec{Policies: []policyv1beta1.NonEmptyString{"p"}}}
	if err := admin.Create(ctx, set); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() (bool, string) {
		got := &policyv1beta1.PolicySet{}
		err := admin.Get(ctx, client.ObjectKeyFromObject(set), got)
		return err == nil && got.Status.StatusMessage != "", fmt.Sprintf("policy set status: %v %+v", err, got.Status)
	})

	// A hub template that encrypts: the hub makes the cluster's key Secret under these rules too.
	secretRoot := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "protected", Namespace: "team1"},
		Spec: policyv1.PolicySpec{RemediationAction: policyv1.Inform, PolicyTemplates: []*policyv1.PolicyTemplate{{
			ObjectDefinition: runtime.RawExtension{Raw: []byte(`{"apiVersion":"policy.open-cluster-management.io/v1","kind":"ConfigurationPolicy","metadata":{"name":"protected"},"spec":{"severity":"low","object-templates":[{"complianceType":"musthave","objectDefinition":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"default"},"data":{"v":"{{hub \"hidden\" | protect hub}}"}}}]}}`)}}}}}
	if err := admin.Create(ctx, secretRoot); err != nil {
		t.Fatal(err)
	}
	binding.Subjects = append(binding.Subjects, policyv1.Subject{APIGroup: policyv1.GroupVersion.Group, Kind: "Policy", Name: "protected"})
	if err := admin.Update(ctx, binding); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() (bool, string) {
		rep := &policyv1.Policy{}
		err := admin.Get(ctx, client.ObjectKey{Namespace: "cluster1", Name: "team1.protected"}, rep)
		if err != nil || len(rep.Spec.PolicyTemplates) == 0 {
			return false, fmt.Sprintf("encrypted replica: %v", err)
		}
		raw := string(rep.Spec.PolicyTemplates[0].ObjectDefinition.Raw)
		return strings.Contains(raw, "$ocm_encrypted:") && !strings.Contains(raw, "hidden"), "replica with the value encrypted: " + raw
	})
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "cluster1", Name: "policy-encryption-key"}, &corev1.Secret{}); err != nil {
		t.Errorf("the cluster's key Secret: %v", err)
	}

	// The addon registers: its Role and binding in the cluster namespace, its registration, its
	// agent's ManifestWork, and the agent's CSR approved.
	mca := &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: "regent", Namespace: "cluster1"}}
	if err := admin.Create(ctx, mca); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() (bool, string) {
		rb := &rbacv1.RoleBinding{}
		err := admin.Get(ctx, client.ObjectKey{Namespace: "cluster1", Name: "regent-addon"}, rb)
		return err == nil, fmt.Sprintf("addon role binding: %v", err)
	})
	eventually(t, time.Minute, func() (bool, string) {
		got := &addonv1alpha1.ManagedClusterAddOn{}
		err := admin.Get(ctx, client.ObjectKeyFromObject(mca), got)
		return err == nil && len(got.Status.Registrations) > 0, fmt.Sprintf("registrations: %v %v", err, got.Status.Registrations)
	})
	eventually(t, time.Minute, func() (bool, string) {
		works := &workv1.ManifestWorkList{}
		err := admin.List(ctx, works, client.InNamespace("cluster1"))
		return err == nil && len(works.Items) > 0, fmt.Sprintf("manifest works: %v", err)
	})
	// The addon manager did all of that as the holder of its own Lease (addon-framework does not
	// elect; Run does).
	lease := &coordinationv1.Lease{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: hubNamespace, Name: addon.LeaderElectionID}, lease); err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("addon manager Lease %s: %v %+v", addon.LeaderElectionID, err, lease.Spec)
	}
	kubeAdmin, err := kubernetes.NewForConfig(f.Hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	agentCSR := addonCSR(t, "cluster1")
	// As OCM's registration agent of cluster1 asks for it: the requester is the cluster's identity,
	// which OCM's registration lets create CSRs.
	for _, o := range []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cluster1-registration"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{certificatesv1.GroupName}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cluster1-registration"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster1-registration"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:open-cluster-management:cluster1"}}},
	} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	asAgent := rest.CopyConfig(f.Hub.Config)
	asAgent.Impersonate = rest.ImpersonationConfig{UserName: "system:open-cluster-management:cluster1:agent",
		Groups: []string{"system:open-cluster-management:cluster1", "system:authenticated"}}
	kubeAgent, err := kubernetes.NewForConfig(asAgent)
	if err != nil {
		t.Fatal(err)
	}
	// The apiserver's RBAC authorizer reads bindings from its own informers, so the binding just
	// made may take a moment to allow the create.
	eventually(t, 30*time.Second, func() (bool, string) {
		_, err := kubeAgent.CertificatesV1().CertificateSigningRequests().Create(ctx, agentCSR, metav1.CreateOptions{})
		if apierrors.IsForbidden(err) {
			return false, err.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		return true, ""
	})
	eventually(t, time.Minute, func() (bool, string) {
		csr, err := kubeAdmin.CertificatesV1().CertificateSigningRequests().Get(ctx, agentCSR.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range csr.Status.Conditions {
			if c.Type == certificatesv1.CertificateApproved {
				return true, ""
			}
		}
		return false, fmt.Sprintf("the addon's CSR is not approved: %+v", csr.Status.Conditions)
	})

	// Beyond it: Forbidden.
	kube, err := kubernetes.NewForConfig(identity)
	if err != nil {
		t.Fatal(err)
	}
	forbidden := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want Forbidden", what, err)
		}
	}
	_, err = kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
	forbidden("list Secrets cluster-wide", err)
	// What the key rotation watches with: the key Secrets, by name, in every cluster namespace.
	if keys, err := kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=policy-encryption-key"}); err != nil || len(keys.Items) != 1 {
		t.Errorf("list the clusters' key Secrets by name: %v", err)
	}
	_, err = kube.CoreV1().Secrets(hubNamespace).List(ctx, metav1.ListOptions{})
	forbidden("list Secrets in its own namespace", err)
	// It may create Secrets (the clusters' policy encryption keys), but no token Secret it could
	// read back under the one name it may read, and no other Secret.
	_, err = kube.CoreV1().Secrets("kube-system").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "policy-encryption-key", Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}},
		Type:       corev1.SecretTypeServiceAccountToken}, metav1.CreateOptions{})
	forbidden("create a ServiceAccount token Secret", err)
	_, err = kube.CoreV1().Secrets("cluster1").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{})
	forbidden("create a Secret other than policy-encryption-key", err)
	role, err := kube.RbacV1().Roles("cluster1").Get(ctx, "regent-addon", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the addon role: %v", err)
	}
	role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
	_, err = kube.RbacV1().Roles("cluster1").Update(ctx, role, metav1.UpdateOptions{})
	forbidden("escalate the addon role to Secrets", err)
	_, err = kube.RbacV1().RoleBindings("cluster1").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "steal"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "regent-hub", Namespace: hubNamespace}},
	}, metav1.CreateOptions{})
	forbidden("bind cluster-admin", err)
	_, err = kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "steal"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}}, metav1.CreateOptions{})
	forbidden("create a ClusterRole", err)
	_, err = kube.RbacV1().Roles("kube-system").Get(ctx, "extension-apiserver-authentication-reader", metav1.GetOptions{})
	forbidden("read a Role that is not the addon's", err)
	otherCSR := addonCSR(t, "cluster1")
	otherCSR.Name, otherCSR.Spec.SignerName = "other-signer", "example.com/other"
	otherCSR.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature}
	otherCSR, err = kubeAdmin.CertificatesV1().CertificateSigningRequests().Create(ctx, otherCSR, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	otherCSR.Status.Conditions = append(otherCSR.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test"})
	_, err = kube.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, otherCSR.Name, otherCSR, metav1.UpdateOptions{})
	forbidden("approve a CSR for another signer", err)
	if otherCSR, err = kubeAdmin.CertificatesV1().CertificateSigningRequests().Get(ctx, otherCSR.Name, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	otherCSR.Status.Certificate = []byte("not signed by the hub")
	_, err = kube.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, otherCSR, metav1.UpdateOptions{})
	forbidden("sign a CSR", err)
	othersLease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "someone-else", Namespace: hubNamespace}}
	if err := admin.Create(ctx, othersLease); err != nil {
		t.Fatal(err)
	}
	_, err = kube.CoordinationV1().Leases(hubNamespace).Get(ctx, othersLease.Name, metav1.GetOptions{})
	forbidden("read a Lease that is not its own", err)
	_, err = kube.CoordinationV1().Leases(hubNamespace).Update(ctx, othersLease, metav1.UpdateOptions{})
	forbidden("take a Lease that is not its own", err)
}

func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// applyManifests creates every object of a multi-document YAML file; namespaced objects without
// a namespace land in hubNamespace, as the kustomization puts them.
func applyManifests(t *testing.T, c client.Client, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := yamlutil.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if namespaced, err := c.IsObjectNamespaced(u); err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		} else if namespaced && u.GetNamespace() == "" {
			u.SetNamespace(hubNamespace)
		}
		if err := c.Create(context.Background(), u); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// serviceAccountConfig returns a client configuration carrying only a token of the ServiceAccount.
func serviceAccountConfig(t *testing.T, admin *rest.Config, namespace, name string) *rest.Config {
	t.Helper()
	kube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	ttl := int64(3600)
	tr, err := kube.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

// addonCSR is the CSR OCM's registration agent makes for the regent addon's agent on cluster.
func addonCSR(t *testing.T, cluster string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{
		CommonName:   agent.DefaultUser(cluster, "regent", "regent-agent"),
		Organization: agent.DefaultGroups(cluster, "regent"),
	}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "addon-" + cluster + "-regent",
			Labels: map[string]string{"open-cluster-management.io/cluster-name": cluster, "open-cluster-management.io/addon-name": "regent"}},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeAPIServerClientSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}
}
