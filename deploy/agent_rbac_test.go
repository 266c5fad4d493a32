package deploy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	addonapiv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"regent.dev/regent/addonidentity"
	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/hub/addon"
	spokeaddon "regent.dev/regent/spoke-addon"
	"regent.dev/regent/test/corpora"
)

// agentUser is the spoke addon's ServiceAccount as the API server names it.
var agentUser = "system:serviceaccount:" + addonidentity.DefaultInstallNamespace + ":regent-spoke-addon"

// The spoke addon runs as its ServiceAccount, with exactly the RBAC the addon delivers: it copies
// a policy from the hub, enforces a namespace and a ConfigMap, deploys the default PolicyServer
// and grants its replicas their RBAC (which the API server allows only to a holder of it), and
// a policy enforcing a kind the defaults leave out is NonCompliant saying which permission is
// missing and how to grant it; one labelled ClusterRole then grants it. Beyond that, Forbidden.
func TestAgentRBAC_TheSpokeAddonWorksWithTheDeliveredRBACAndNoMore(t *testing.T) {
	f := fleettest.Start(t, fleet.Options{Managed: []fleet.ClusterSpec{{Name: "cluster1"}}})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	spoke := f.Managed[0]
	admin, err := client.New(spoke.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	hubAdmin, err := client.New(f.Hub.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	installAgentRBAC(t, admin)
	waitAggregated(t, admin)

	identity := agentToken(t, spoke.Config)
	hubIdentity, err := spokeaddon.IssueHubIdentity(ctx, f.Hub.Config, "cluster1", 3600)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := spokeaddon.New(spokeaddon.Options{Hub: hubIdentity, Local: identity, ClusterName: "cluster1",
		InstallNamespace: addonidentity.DefaultInstallNamespace})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("spoke addon: %v", err)
		}
	})

	// Replicated policies as the hub's propagator writes them into the cluster namespace.
	for name, objects := range map[string]string{
		"allowed": `
        - complianceType: musthave
          objectDefinition: {apiVersion: v1, kind: Namespace, metadata: {name: rbac-enforced}}
        - complianceType: musthave
          objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: marker, namespace: rbac-enforced}, data: {k: v}}`,
		"not-granted": `
        - complianceType: musthave
          objectDefinition: {apiVersion: v1, kind: Secret, metadata: {name: not-granted, namespace: default}, stringData: {k: v}}`,
	} {
		replica := fmt.Sprintf(`apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata: {name: team.%s, namespace: cluster1, labels: {policy.open-cluster-management.io/root-policy: team.%s, policy.open-cluster-management.io/cluster-name: cluster1, policy.open-cluster-management.io/cluster-namespace: cluster1}}
spec:
  remediationAction: enforce
  disabled: false
  policy-templates:
  - objectDefinition:
      apiVersion: policy.open-cluster-management.io/v1
      kind: ConfigurationPolicy
      metadata: {name: %s}
      spec:
        remediationAction: inform
        severity: low
        object-templates:%s`, name, name, name, objects)
		createReplica(t, hubAdmin, replica)
	}

	t.Run("EnforcesANamespaceAndAConfigMap", func(t *testing.T) {
		waitCompliance(t, admin, "allowed", policyv1.Compliant, "")
		cm := &corev1.ConfigMap{}
		if err := admin.Get(ctx, types.NamespacedName{Namespace: "rbac-enforced", Name: "marker"}, cm); err != nil || cm.Data["k"] != "v" {
			t.Errorf("the enforced ConfigMap: %v %v", err, cm.Data)
		}
	})
	t.Run("AKindItMayNotWriteIsNonCompliantNamingThePermissionAndTheLabel", func(t *testing.T) {
		waitCompliance(t, admin, "not-granted", policyv1.NonCompliant,
			`may not create secrets in API group "": grant it with a ClusterRole labelled `+addonidentity.AggregateToSpokeAddonLabel)
	})
	t.Run("TheDefaultPolicyServerGetsItsRBACFromTheAddon", func(t *testing.T) {
		// As the addon manager delivers it.
		cluster := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "cluster1"}}
		mca := &addonapiv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: addonidentity.AddonName, Namespace: "cluster1"}}
		objs, err := addon.AgentManifests(ctx, "", nil, cluster, mca)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if ps, ok := o.(*kubewardenv1.PolicyServer); ok {
				if err := admin.Create(ctx, ps); err != nil {
					t.Fatal(err)
				}
			}
		}
		fleettest.Eventually(t, time.Minute, func() (bool, string) {
			ps := &kubewardenv1.PolicyServer{}
			if err := admin.Get(ctx, types.NamespacedName{Name: "default"}, ps); err != nil {
				return false, err.Error()
			}
			// RBACReady: the agent could grant what the policy server needs; Deployed: it could
			// write every object the policy server runs as (StatefulSet, leader Deployment,
			// Secrets, Service, …), which a missing rule stops with a Forbidden.
			rbac := meta.FindStatusCondition(ps.Status.Conditions, "RBACReady")
			deployed := meta.FindStatusCondition(ps.Status.Conditions, "Deployed")
			return rbac != nil && rbac.Status == metav1.ConditionTrue && deployed != nil && deployed.Status == metav1.ConditionTrue,
				fmt.Sprintf("RBACReady %+v, Deployed %+v", rbac, deployed)
		})
	})
	t.Run("OneLabelledClusterRoleGrantsAKind", func(t *testing.T) {
		if allowed(t, spoke.Config, "create", "", "secrets", "default") {
			t.Fatal("the agent may already create Secrets outside its namespaces")
		}
		if err := admin.Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "regent-enforce-secrets", Labels: map[string]string{addonidentity.AggregateToSpokeAddonLabel: "true"}},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "update", "patch", "delete"}}},
		}); err != nil {
			t.Fatal(err)
		}
		fleettest.Eventually(t, time.Minute, func() (bool, string) {
			return allowed(t, spoke.Config, "create", "", "secrets", "default"), "the labelled ClusterRole is not aggregated yet"
		})
	})
	// What the default roles grant, measured against the policies that will run: the project's
	// own, and OCM's policy-collection when REGENT_CORPORA names it.
	t.Run("TheDefaultRolesGrantWhatTheQuickstartPoliciesNeed", func(t *testing.T) {
		checkNeedsGranted(t, spoke.Config, admin.RESTMapper(), policyNeeds(t, "../quickstart"))
	})
	t.Run("TheDefaultRolesGrantWhatPolicyCollectionNeeds", func(t *testing.T) {
		needs := policyNeeds(t, corpora.Dir(t, "policy-collection"))
		if len(needs) < 10 {
			t.Fatalf("found %d object templates in policy-collection", len(needs))
		}
		checkNeedsGranted(t, spoke.Config, admin.RESTMapper(), needs)
	})
	t.Run("BeyondItForbidden", func(t *testing.T) {
		for _, c := range []struct{ verb, group, resource, ns string }{
			{"create", "apps", "deployments", "default"},
			{"create", "", "pods", "kube-system"},
			{"delete", "", "pods", "default"},
			{"create", "apps", "statefulsets", "kube-system"},
			{"create", "", "serviceaccounts/token", "kube-system"},
			{"create", "", "nodes", ""},
			{"update", "", "nodes", ""},
			{"escalate", "rbac.authorization.k8s.io", "clusterroles", ""},
			{"bind", "rbac.authorization.k8s.io", "clusterroles", ""},
			{"impersonate", "", "users", ""},
			{"approve", "certificates.k8s.io", "signers", ""},
		} {
			if allowed(t, spoke.Config, c.verb, c.group, c.resource, c.ns) {
				t.Errorf("the agent may %s %s.%s in %q", c.verb, c.resource, c.group, c.ns)
			}
		}
		// No rule grants every verb on every resource.
		roles := &rbacv1.ClusterRoleList{}
		if err := admin.List(ctx, roles); err != nil {
			t.Fatal(err)
		}
		for _, r := range roles.Items {
			if !strings.HasPrefix(r.Name, "regent-spoke-addon") {
				continue
			}
			for _, rule := range r.Rules {
				if slices.Contains(rule.Resources, "*") && slices.Contains(rule.Verbs, "*") {
					t.Errorf("ClusterRole %s grants every verb on every resource: %+v", r.Name, rule)
				}
			}
		}
	})
}

// installAgentRBAC creates the delivered ServiceAccount, the policy servers' namespace and the
// agent's RBAC on the cluster (the Deployment has no node to run on here: the test runs the addon).
func installAgentRBAC(t *testing.T, c client.Client) {
	t.Helper()
	cluster := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "cluster1"}}
	mca := &addonapiv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: addonidentity.AddonName, Namespace: "cluster1"}}
	objs, err := addon.AgentManifests(context.Background(), "", nil, cluster, mca)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: addonidentity.DefaultInstallNamespace}}); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o.(type) {
		case *corev1.ServiceAccount, *corev1.Namespace, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *rbacv1.Role, *rbacv1.RoleBinding:
			if err := c.Create(context.Background(), o.DeepCopyObject().(client.Object)); err != nil {
				t.Fatalf("create %T: %v", o, err)
			}
		}
	}
}

// waitAggregated waits for the cluster's aggregation controller to fill the policies role.
func waitAggregated(t *testing.T, c client.Client) {
	t.Helper()
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		r := &rbacv1.ClusterRole{}
		if err := c.Get(context.Background(), types.NamespacedName{Name: "regent-spoke-addon-policies"}, r); err != nil {
			return false, err.Error()
		}
		return len(r.Rules) > 0, "the aggregated ClusterRole has no rules yet"
	})
}

func agentToken(t *testing.T, admin *rest.Config) *rest.Config {
	t.Helper()
	ttl := int64(3600)
	tr, err := kubernetes.NewForConfigOrDie(admin).CoreV1().ServiceAccounts(addonidentity.DefaultInstallNamespace).CreateToken(context.Background(),
		"regent-spoke-addon", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

// allowed asks the API server whether the agent's ServiceAccount may do verb on resource.
func allowed(t *testing.T, admin *rest.Config, verb, group, resource, ns string) bool {
	t.Helper()
	res, sub, _ := strings.Cut(resource, "/")
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               agentUser,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + addonidentity.DefaultInstallNamespace, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: res, Subresource: sub, Namespace: ns},
	}}
	got, err := kubernetes.NewForConfigOrDie(admin).AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Status.Allowed
}

func waitCompliance(t *testing.T, c client.Client, name string, want policyv1.ComplianceState, message string) {
	t.Helper()
	fleettest.Eventually(t, 2*time.Minute, func() (bool, string) {
		p := &policyv1.ConfigurationPolicy{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: "cluster1", Name: name}, p); err != nil {
			return false, err.Error()
		}
		var msgs []string
		for _, d := range p.Status.CompliancyDetails {
			for _, cond := range d.Conditions {
				msgs = append(msgs, cond.Message)
			}
		}
		all := strings.Join(msgs, "; ")
		return p.Status.ComplianceState == want && strings.Contains(all, message),
			fmt.Sprintf("ConfigurationPolicy %s: %s %q", name, p.Status.ComplianceState, all)
	})
}

func createReplica(t *testing.T, c client.Client, doc string) {
	t.Helper()
	obj := &policyv1.Policy{}
	if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	// The propagator's status write is what makes a replica the hub's for the spoke addon.
	obj.Status.RolloutStatus = policyv1.RolloutProgressing
	if err := c.Status().Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}
