package admissionpolicy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/policyserver/lifecycle"
)

// The Roles are proven complete by a real replica and a real leader doing their whole job, each
// as its ServiceAccount, and minimal by what the same identities are refused.
func TestPolicyServerRBAC_AReplicaAndTheLeaderAsTheirServiceAccountsLeadLoadAndReportReady_AndNothingMore(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config)
	ctx := context.Background()
	const sa = "regent-policy-server-rbac"
	ps := &kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: "rbac"},
		Spec: kubewardenv1.PolicyServerSpec{Image: "regent:dev", Replicas: 1}}
	if err := c.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	waitRBAC(t, c, "rbac", metav1.ConditionTrue, "Granted")
	sts := &appsv1.StatefulSet{}
	eventually(t, "StatefulSet and signing Secret", func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: sa}, sts) == nil &&
			c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: signingSecretName("rbac")}, &corev1.Secret{}) == nil
	})
	if got := sts.Spec.Template.Spec.ServiceAccountName; got != sa {
		t.Errorf("pods run as %q, want %q", got, sa)
	}

	cfg := serviceAccountConfig(t, hub.Config, sa)
	as, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	logs := &logLines{}
	logs.captureKlog(t)
	// The leader process leads, as the leader's identity; the replica never campaigns.
	leaderCfg := serviceAccountConfig(t, hub.Config, sa+"-leader")
	stopLeader := runProcess(t, leaderCfg, lifecycle.RoleLeader, "rbac", logs.logger())
	stop := runProcess(t, cfg, lifecycle.RoleReplica, "rbac", logs.logger())

	p := clusterPolicy("rbac-reader", "rbac")
	p.Spec.Module, p.Spec.ExecutionMode = regoModule(t), "opa"
	p.Spec.ContextAwareResources = []kubewardenv1.ContextAwareResource{{APIVersion: "v1", Kind: "Namespace"}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitForPolicy(t, c, "rbac-reader", "served by replica 0 at generation 1", func(q *kubewardenv1.ClusterAdmissionPolicy) bool {
		return q.Status.ServingGeneration == 1 && q.Status.Phase == kubewardenv1.PhaseActive && readyReplicas(q.Status, metav1.ConditionTrue) == "0"
	})
	rev := &kubewardenv1.PolicyRevision{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: "clusterwide-rbac-reader-g1"}, rev); err != nil {
		t.Fatal(err)
	}
	if rev.Status.CacheKey == "" {
		t.Errorf("the leader initialized the revision without a cache key: %+v", rev.Status)
	}
	leader := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: "regent-policy-server-rbac"}, leader); err != nil ||
		leader.Spec.HolderIdentity == nil || !strings.HasPrefix(*leader.Spec.HolderIdentity, "leader_") {
		t.Errorf("leader Lease = %+v (%v), want held by the leader process", leader.Spec, err)
	}
	if rs := findReplica(rev.Status.Replicas, 0); rs == nil || rs.Reason != lifecycle.ReasonLoaded || !strings.Contains(rs.Message, "fetched from the leader") {
		t.Errorf("replica 0's report %+v: want the signed entry fetched from the leader", rs)
	}

	// Context-aware reads and can_i, through the same identity.
	eventually(t, "the ServiceAccount reads namespaces", func() bool {
		return as.List(ctx, &corev1.NamespaceList{}) == nil && as.Get(ctx, client.ObjectKey{Name: "default"}, &corev1.Namespace{}) == nil
	})
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice",
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods", Namespace: "default"}}}
	if err := as.Create(ctx, review); err != nil {
		t.Errorf("can_i's SubjectAccessReview: %v", err)
	}

	// A replica verifies with the certificates, and never reads the key that signs.
	public := &corev1.Secret{}
	if err := as.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: "regent-policy-server-rbac-signing"}, public); err != nil ||
		len(public.Data["ca.crt"]) == 0 || len(public.Data["signer.crt"]) == 0 || public.Data["signer.key"] != nil {
		t.Errorf("the replica's signing Secret holds %v (%v), want the certificates and no key", keysOf(public.Data), err)
	}
	keySecret := client.ObjectKey{Namespace: testNamespace, Name: "regent-policy-server-rbac-signing-key"}
	if err := as.Get(ctx, keySecret, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("get the signing key Secret as a replica: %v, want Forbidden", err)
	}
	leaderAs, err := client.New(leaderCfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := leaderAs.Get(ctx, keySecret, &corev1.Secret{}); err != nil {
		t.Errorf("get the signing key Secret as the leader: %v", err)
	}
	replicaLease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: "regent-policy-server-rbac-replica-0"}, replicaLease); err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{
		"the leader lists Secrets":           leaderAs.List(ctx, &corev1.SecretList{}, client.InNamespace(testNamespace)),
		"the leader gets the CA Secret":      leaderAs.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: caSecretName("rbac")}, &corev1.Secret{}),
		"the leader gets the serving Secret": leaderAs.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: servingSecretName("rbac")}, &corev1.Secret{}),
		"the leader updates a replica Lease": leaderAs.Update(ctx, replicaLease.DeepCopy()),
		"the leader deletes a revision":      leaderAs.Delete(ctx, rev.DeepCopy()),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want Forbidden", what, err)
		}
	}

	// What a replica never does is refused.
	forbidden := map[string]error{
		"get the CA Secret":            as.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: caSecretName("rbac")}, &corev1.Secret{}),
		"get the serving Secret":       as.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: servingSecretName("rbac")}, &corev1.Secret{}),
		"list the namespace's Secrets": as.List(ctx, &corev1.SecretList{}, client.InNamespace(testNamespace)),
		"delete a PolicyRevision":      as.Delete(ctx, rev.DeepCopy()),
		"delete the leader Lease":      as.Delete(ctx, leader.DeepCopy()),
		"update the leader Lease":      as.Update(ctx, leader.DeepCopy()),
		"get another server's Lease": as.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: "regent-policy-server-other"},
			&coordinationv1.Lease{}),
		// The policy is on pods with backgroundAudit, so the background scan may list and
		// watch them; it never gets one.
		"get a pod":         as.Get(ctx, client.ObjectKey{Namespace: "default", Name: "x"}, &corev1.Pod{}),
		"list ConfigMaps":   as.List(ctx, &corev1.ConfigMapList{}),
		"create a Role":     as.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "x"}}),
		"update a revision": func() error { r := rev.DeepCopy(); r.Spec.Enabled = false; return as.Update(ctx, r) }(),
	}
	for what, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s as the policy server: %v, want Forbidden", what, err)
		}
	}
	// The background scan is the leader's: it lists what the policy's rules name, the replicas
	// never do.
	if serviceAccountMay(t, c, sa, "list", "", "pods", "", "") {
		t.Error("a replica may list pods: the background scan's access went to the replicas")
	}
	if !serviceAccountComesTo(t, c, true, sa+"-leader", "list", "", "pods", "", "") {
		t.Error("the leader may not list pods for the background scan")
	}

	// The policy stops listing namespaces: once the generation without them serves, they are
	// refused again.
	update(t, c, p, func() { p.Spec.ContextAwareResources = nil })
	waitForPolicy(t, c, "rbac-reader", "served at generation 2", func(q *kubewardenv1.ClusterAdmissionPolicy) bool {
		return q.Status.ServingGeneration == 2
	})
	eventually(t, "namespaces are Forbidden again", func() bool {
		return apierrors.IsForbidden(as.List(ctx, &corev1.NamespaceList{}))
	})

	// A graceful stop deletes the replica's own Lease and releases the leader's.
	stop()
	stopLeader()
	err = c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: "regent-policy-server-rbac-replica-0"}, &coordinationv1.Lease{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("replica Lease after a graceful stop: %v, want deleted", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(leader), leader); err != nil || (leader.Spec.HolderIdentity != nil && *leader.Spec.HolderIdentity != "") {
		t.Errorf("leader Lease after a graceful stop = %+v (%v), want released", leader.Spec, err)
	}
	if refused := logs.matching("forbidden"); len(refused) > 0 {
		t.Errorf("the replica or the leader was refused calls:\n%s", strings.Join(refused, "\n"))
	}

	// Deleting the PolicyServer takes its identity along.
	if err := c.Delete(ctx, ps); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: sa}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: sa}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: sa}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: sa + "-context"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa + "-context"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: sa + "-leader"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: sa + "-leader"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: sa + "-leader"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa + "-leader"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: sa + "-leader"}},
	} {
		fleettest.Eventually(t, time.Minute, func() (bool, string) {
			err := c.Get(ctx, client.ObjectKeyFromObject(o), o)
			return apierrors.IsNotFound(err), fmt.Sprintf("%T %s is still there (%v)", o, o.GetName(), err)
		})
	}
}

// Reads follow the newest generation at once and the serving one until it stops serving, so a
// generation in rollout and the one still answering both find what they look up.
func TestPolicyServerRBAC_ContextReadsFollowTheNewestAndTheServingGeneration_AcrossPolicyServers(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config)
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		if err := c.Create(ctx, &kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: kubewardenv1.PolicyServerSpec{Image: "regent:dev", Replicas: 1}}); err != nil {
			t.Fatal(err)
		}
		liveLeases(t, c, name, 0)
	}
	reads := func(ps, resource string) func() bool {
		return func() bool {
			return serviceAccountMay(t, c, serviceAccountName(ps), "list", "", resource, "", "") &&
				serviceAccountMay(t, c, serviceAccountName(ps), "get", "", resource, "default", "x")
		}
	}
	refused := func(ps, resource string) func() bool {
		return func() bool {
			return !serviceAccountMay(t, c, serviceAccountName(ps), "get", "", resource, "default", "x")
		}
	}
	serves := func(gen int64) func(*kubewardenv1.ClusterAdmissionPolicy) bool {
		return func(q *kubewardenv1.ClusterAdmissionPolicy) bool { return q.Status.ServingGeneration == gen }
	}
	both := func(conds ...func() bool) func() bool {
		return func() bool {
			for _, c := range conds {
				if !c() {
					return false
				}
			}
			return true
		}
	}
	waitRBAC(t, c, "a", metav1.ConditionTrue, "Granted")
	if !refused("a", "namespaces")() {
		t.Fatal("a policy server without context-aware policies reads namespaces")
	}

	p := clusterPolicy("reader", "a")
	p.Spec.ContextAwareResources = []kubewardenv1.ContextAwareResource{{APIVersion: "v1", Kind: "Namespace"}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a reads namespaces as soon as the policy names them", reads("a", "namespaces"))
	report(t, c, "clusterwide-reader-g1", append(readyOn(metav1.ConditionTrue, 0), initializedTrue())...)
	waitForPolicy(t, c, "reader", "serving 1", serves(1))
	if !refused("b", "namespaces")() {
		t.Error("b reads what only a's policy lists")
	}

	update(t, c, p, func() {
		p.Spec.ContextAwareResources = []kubewardenv1.ContextAwareResource{{APIVersion: "v1", Kind: "ConfigMap"}}
	})
	eventually(t, "a reads configmaps for generation 2", reads("a", "configmaps"))
	if !reads("a", "namespaces")() {
		t.Error("generation 1 still serves, but its namespaces were taken away")
	}
	report(t, c, "clusterwide-reader-g2", append(readyOn(metav1.ConditionTrue, 0), initializedTrue())...)
	waitForPolicy(t, c, "reader", "serving 2", serves(2))
	eventually(t, "namespaces go once generation 1 stops serving", both(refused("a", "namespaces"), reads("a", "configmaps")))

	// Moved to b: policyServer is immutable, as in Kubewarden, so a move is a new policy on b
	// and the old one deleted. b reads at once; a's configmaps go with its policy.
	moved := clusterPolicy("reader-b", "b")
	moved.Spec.ContextAwareResources = p.Spec.ContextAwareResources
	if err := c.Create(ctx, moved); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b reads configmaps for the moved policy", reads("b", "configmaps"))
	if err := c.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a's configmaps go with its policy", refused("a", "configmaps"))
	p = moved

	// A kind the cluster does not serve is reported and skipped; the rest stays granted.
	update(t, c, p, func() {
		p.Spec.ContextAwareResources = append(p.Spec.ContextAwareResources, kubewardenv1.ContextAwareResource{APIVersion: "example.com/v1", Kind: "Widget"})
	})
	cond := waitRBAC(t, c, "b", metav1.ConditionFalse, "UnknownContextAwareResource")
	if !strings.Contains(cond.Message, "ClusterAdmissionPolicy reader-b: example.com/v1 Widget") || !strings.Contains(cond.Message, "configmaps") {
		t.Errorf("condition message %q should name the policy, the kind, and what is granted", cond.Message)
	}
	if !reads("b", "configmaps")() {
		t.Error("an unknown kind took the known ones away")
	}
	update(t, c, p, func() { p.Spec.ContextAwareResources = p.Spec.ContextAwareResources[:1] })
	waitRBAC(t, c, "b", metav1.ConditionTrue, "Granted")
}

// A PolicyServer naming its own ServiceAccount gets it bound; the controller's is removed.
func TestPolicyServerRBAC_AServiceAccountTheUserNamesIsBoundNotCreated(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config)
	ctx := context.Background()
	ps := &kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: "own"},
		Spec: kubewardenv1.PolicyServerSpec{Image: "regent:dev", Replicas: 2}}
	if err := c.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	waitRBAC(t, c, "own", metav1.ConditionTrue, "Granted")
	if !serviceAccountComesTo(t, c, true, serviceAccountName("own"), "update", "coordination.k8s.io", "leases", testNamespace, "regent-policy-server-own-replica-1") {
		t.Error("replica 1's Lease is not granted")
	}

	update(t, c, ps, func() { ps.Spec.ServiceAccountName = "mine" })
	cond := waitRBAC(t, c, "own", metav1.ConditionFalse, "ServiceAccountMissing")
	if !strings.Contains(cond.Message, testNamespace+"/mine") {
		t.Errorf("message %q does not name the missing ServiceAccount", cond.Message)
	}
	eventually(t, "the controller's ServiceAccount is removed", func() bool {
		err := c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: serviceAccountName("own")}, &corev1.ServiceAccount{})
		return apierrors.IsNotFound(err)
	})
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "mine"}}); err != nil {
		t.Fatal(err)
	}
	waitRBAC(t, c, "own", metav1.ConditionTrue, "Granted")
	sts := &appsv1.StatefulSet{}
	eventually(t, "pods run as mine", func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: "regent-policy-server-own"}, sts) == nil &&
			sts.Spec.Template.Spec.ServiceAccountName == "mine"
	})
	for _, check := range []struct{ verb, group, resource, ns, name string }{
		{"get", "", "secrets", testNamespace, signingSecretName("own")},
		{"update", "policies.kubewarden.io", "policyrevisions/status", testNamespace, ""},
		{"create", "authorization.k8s.io", "subjectaccessreviews", "", ""},
		{"create", "reports.regent.dev", "resourcereports", "default", ""},
		{"update", "reports.regent.dev", "clusterresourcereports", "", ""},
	} {
		if !serviceAccountComesTo(t, c, true, "mine", check.verb, check.group, check.resource, check.ns, check.name) {
			t.Errorf("mine may not %s %s", check.verb, check.resource)
		}
		if !serviceAccountComesTo(t, c, false, serviceAccountName("own"), check.verb, check.group, check.resource, check.ns, check.name) {
			t.Errorf("the controller's former ServiceAccount may still %s %s", check.verb, check.resource)
		}
	}

	// The key stays with the leader identity, whoever runs the replicas.
	if serviceAccountMay(t, c, "mine", "get", "", "secrets", testNamespace, signingKeySecretName("own")) {
		t.Error("the user's ServiceAccount may read the signing key")
	}
	if !serviceAccountComesTo(t, c, true, leaderIdentityName("own"), "get", "", "secrets", testNamespace, signingKeySecretName("own")) {
		t.Error("the leader identity may not read the signing key")
	}

	// Scaled down: the removed replica's Lease stays granted until the replica deletes it.
	liveLeases(t, c, "own", 1)
	update(t, c, ps, func() { ps.Spec.Replicas = 1 })
	eventually(t, "StatefulSet scaled down", func() bool {
		return c.Get(ctx, client.ObjectKeyFromObject(sts), sts) == nil && *sts.Spec.Replicas == 1
	})
	if !serviceAccountComesTo(t, c, true, "mine", "delete", "coordination.k8s.io", "leases", testNamespace, "regent-policy-server-own-replica-1") {
		t.Error("the stopping replica 1 may not delete its Lease")
	}
	if err := c.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "regent-policy-server-own-replica-1"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "replica 1's Lease is no longer granted", func() bool {
		return !serviceAccountMay(t, c, "mine", "update", "coordination.k8s.io", "leases", testNamespace, "regent-policy-server-own-replica-1")
	})
	if err := c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: "mine"}, &corev1.ServiceAccount{}); err != nil {
		t.Errorf("the user's ServiceAccount: %v", err)
	}
}

func keysOf(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A process that may lead but not read the key (here a replica's identity a user also let
// campaign, running --role=all) cannot sign: it validates each revision unsigned, says why, and
// replicas compile the module themselves.
func TestPolicyServerRBAC_WithoutTheLeaderIdentity_RevisionsServeUnsigned(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config)
	ctx := context.Background()
	ps := &kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: "unsigned"},
		Spec: kubewardenv1.PolicyServerSpec{Image: "regent:dev", Replicas: 1}}
	if err := c.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	waitRBAC(t, c, "unsigned", metav1.ConditionTrue, "Granted")
	eventually(t, "signing Secrets", func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: signingKeySecretName("unsigned")}, &corev1.Secret{}) == nil
	})
	mayCampaign := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "unsigned-campaigns"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"},
			ResourceNames: []string{serverObjectName("unsigned")}, Verbs: []string{"get", "update"}}}}
	if err := c.Create(ctx, mayCampaign); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: mayCampaign.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: mayCampaign.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: serviceAccountName("unsigned"), Namespace: testNamespace}}}); err != nil {
		t.Fatal(err)
	}
	cfg := serviceAccountConfig(t, hub.Config, serviceAccountName("unsigned"))
	defer runProcess(t, cfg, lifecycle.RoleAll, "unsigned", logr.Discard())()
	p := clusterPolicy("unsigned-p", "unsigned")
	p.Spec.Module, p.Spec.ExecutionMode = regoModule(t), "opa"
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitForPolicy(t, c, "unsigned-p", "served by replica 0", func(q *kubewardenv1.ClusterAdmissionPolicy) bool {
		return q.Status.ServingGeneration == 1 && readyReplicas(q.Status, metav1.ConditionTrue) == "0"
	})
	rev := &kubewardenv1.PolicyRevision{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: "clusterwide-unsigned-p-g1"}, rev); err != nil {
		t.Fatal(err)
	}
	init := revisionCondition(rev, kubewardenv1.ConditionInitialized)
	if init == nil || init.Reason != "InitializedUnsigned" || !strings.Contains(init.Message, leaderIdentityName("unsigned")) || rev.Status.CacheKey != "" {
		t.Errorf("Initialized = %+v, cache key %q: want unsigned, naming the leader identity, no entry", init, rev.Status.CacheKey)
	}
	if ready := findReplica(rev.Status.Replicas, 0); ready == nil || ready.Reason != "CompiledLocally" {
		t.Errorf("Ready on replica 0 = %+v, want CompiledLocally", ready)
	}
}
