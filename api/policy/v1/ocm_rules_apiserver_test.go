package v1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/fleet/fleettest"
)

// ocmNameMessage is OCM's own wording, so scripts that match on it keep working.
const ocmNameMessage = "the combined length of the policy namespace and name cannot exceed 62 characters"

// rootNameMustFitTheLabel: <namespace>.<name> of a root becomes the value of its replicas'
// root-policy label, so it is refused at apply time when longer than 63 characters. Replicas,
// whose name is already that value and whose namespace is a cluster's, are not checked.
func rootNameMustFitTheLabel(ctx context.Context, t *testing.T, c client.Client) {
	const ns = "policies" // 8 characters
	fits := policy(t, strings.Repeat("a", 62-len(ns)), "spec: {}")
	fits.SetNamespace(ns)
	if err := c.Create(ctx, fits); err != nil {
		t.Errorf("root of 62 characters (63 with the dot): %v", err)
	}
	tooLong := policy(t, strings.Repeat("b", 63-len(ns)), "spec: {}")
	tooLong.SetNamespace(ns)
	err := c.Create(ctx, tooLong)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), ocmNameMessage) {
		t.Errorf("root of 63 characters (64 with the dot): %v, want Invalid with OCM's message", err)
	}

	// A replica of the longest root in a cluster namespace with a long name.
	clusterNS := "cluster-" + strings.Repeat("c", 40)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterNS}}); err != nil {
		t.Fatal(err)
	}
	replicaName := ns + "." + fits.GetName()
	replica := policy(t, replicaName, "spec: {}")
	replica.SetNamespace(clusterNS)
	replica.SetLabels(map[string]string{
		"policy.open-cluster-management.io/root-policy":       replicaName,
		"policy.open-cluster-management.io/cluster-name":      clusterNS,
		"policy.open-cluster-management.io/cluster-namespace": clusterNS,
	})
	if err := c.Create(ctx, replica); err != nil {
		t.Errorf("replica %s/%s: %v", clusterNS, replicaName, err)
	}
}

// rootRefusedInClusterNamespace: a managed cluster's namespace (labelled by OCM's registration)
// holds only the propagator's replicas, so a root created there is refused at apply time with a
// message that names the cluster and says where roots go; a replica there, and a root in any other
// namespace, are accepted.
func rootRefusedInClusterNamespace(ctx context.Context, t *testing.T, c client.Client) {
	const clusterNS, cluster = "cluster-a", "cluster-a"
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: clusterNS, Labels: map[string]string{"open-cluster-management.io/cluster-name": cluster}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"team": "a"}}},
	} {
		if err := c.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	const want = "the policy cannot be created in namespace cluster-a: it is the namespace of managed cluster cluster-a, " +
		"which holds only replicated policies; create the root policy in another namespace"
	root := policy(t, "sneaky", "spec: {}")
	root.SetNamespace(clusterNS)
	// The apiserver loads a new admission policy in the background: wait until it refuses, without
	// storing anything while it does not yet.
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		err := c.Create(ctx, root.DeepCopy(), client.DryRunAll)
		return apierrors.IsForbidden(err), fmt.Sprintf("dry-run create of a root in %s: %v", clusterNS, err)
	})
	err := c.Create(ctx, root.DeepCopy())
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("root in cluster namespace %s: %v, want Forbidden with %q", clusterNS, err, want)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(root), root.DeepCopy()); !apierrors.IsNotFound(err) {
		t.Errorf("refused root: get %v, want NotFound (nothing stored)", err)
	}

	replica := policy(t, "policies.sneaky", "spec: {}")
	replica.SetNamespace(clusterNS)
	replica.SetLabels(map[string]string{
		"policy.open-cluster-management.io/root-policy":       "policies.sneaky",
		"policy.open-cluster-management.io/cluster-name":      cluster,
		"policy.open-cluster-management.io/cluster-namespace": clusterNS,
	})
	if err := c.Create(ctx, replica); err != nil {
		t.Errorf("replica in cluster namespace %s: %v", clusterNS, err)
	}
	elsewhere := policy(t, "sneaky", "spec: {}")
	elsewhere.SetNamespace("team-a")
	if err := c.Create(ctx, elsewhere); err != nil {
		t.Errorf("root in a namespace of no cluster: %v", err)
	}
}

// dependenciesAsOnOCM is OCM's CRD validation of dependencies and extraDependencies: a
// ConfigurationPolicy or CertificatePolicy takes no namespace (it lives in the cluster namespace),
// other kinds may name one; apiVersion, kind, name and compliance are required.
func dependenciesAsOnOCM(ctx context.Context, t *testing.T, c client.Client) {
	const (
		nsRefused       = "namespace must be empty for a ConfigurationPolicy or CertificatePolicy dependency"
		apiVersionFirst = "apiVersion: policy.open-cluster-management.io/v1\n"
	)
	for i, tc := range []struct {
		name, dependency string
		refused          string // "" when accepted
	}{
		{"ConfigurationPolicy with a namespace", apiVersionFirst + "kind: ConfigurationPolicy\nname: foo\nnamespace: default\ncompliance: Compliant", nsRefused},
		{"CertificatePolicy with a namespace", apiVersionFirst + "kind: CertificatePolicy\nname: foo\nnamespace: default\ncompliance: Compliant", nsRefused},
		{"ConfigurationPolicy with an empty namespace", apiVersionFirst + "kind: ConfigurationPolicy\nname: foo\nnamespace: \"\"\ncompliance: Compliant", ""},
		{"ConfigurationPolicy without a namespace", apiVersionFirst + "kind: ConfigurationPolicy\nname: foo\ncompliance: NonCompliant", ""},
		{"CertificatePolicy without a namespace", apiVersionFirst + "kind: CertificatePolicy\nname: foo\ncompliance: Compliant", ""},
		{"Policy with a namespace", apiVersionFirst + "kind: Policy\nname: foo\nnamespace: default\ncompliance: Compliant", ""},
		{"Policy without a namespace", apiVersionFirst + "kind: Policy\nname: foo\ncompliance: Compliant", ""},
		{"PolicySet with a namespace", apiVersionFirst + "kind: PolicySet\nname: foo\nnamespace: default\ncompliance: Pending", ""},
		{"PolicySet without a namespace", apiVersionFirst + "kind: PolicySet\nname: foo\ncompliance: Compliant", ""},
		{"another kind with a namespace", "apiVersion: example.com/v1\nkind: OtherType\nname: foo\nnamespace: default\ncompliance: Compliant", ""},
		{"another kind without a namespace", "apiVersion: example.com/v1\nkind: OtherType\nname: foo\ncompliance: Compliant", ""},
		{"a kind that only contains ConfigurationPolicy", apiVersionFirst + "kind: MyConfigurationPolicy\nname: foo\nnamespace: default\ncompliance: Compliant", ""},
		{"without compliance", apiVersionFirst + "kind: Policy\nname: foo", "compliance: Required value"},
		{"without apiVersion", "kind: Policy\nname: foo\ncompliance: Compliant", "apiVersion is required"},
		{"without kind", apiVersionFirst + "name: foo\ncompliance: Compliant", "kind is required"},
		{"without name", apiVersionFirst + "kind: Policy\ncompliance: Compliant", "name: Required value"},
	} {
		for _, where := range []struct{ field, spec string }{
			{"dependencies", "spec:\n  dependencies:\n  - " + indent(tc.dependency, "    ")[4:]},
			{"extraDependencies", "spec:\n  policy-templates:\n  - objectDefinition:\n      apiVersion: policy.open-cluster-management.io/v1\n      kind: ConfigurationPolicy\n      metadata: {name: cfg}\n      spec: {remediationAction: inform}\n    extraDependencies:\n    - " + indent(tc.dependency, "      ")[6:]},
		} {
			t.Run(where.field+"/"+tc.name, func(t *testing.T) {
				obj := policy(t, fmt.Sprintf("dep-%d-%s", i, strings.ToLower(where.field)), where.spec)
				obj.SetNamespace("invalid")
				err := c.Create(ctx, obj)
				switch {
				case tc.refused == "" && err != nil:
					t.Fatalf("refused, OCM accepts it: %v", err)
				case tc.refused != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.refused)):
					t.Fatalf("create = %v, want Invalid saying %q as OCM refuses it", err, tc.refused)
				}
			})
		}
	}
}
