package opa

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/hub"
	"regent.dev/regent/policyserver/selfsigned"
)

// hubNamespace is where deploy/hub installs the hub; its placement policies live there too.
const hubNamespace = "regent-system"

// euPCIPolicy is the seed's example as a Placement policy: Placements of namespaces labelled
// compliance=pci may only select EU clusters whose PCI level is 2 or more, and one that asks for
// another region is refused.
const euPCIPolicy = `package regent.placement

pci if input.namespace.labels.compliance == "pci"

# The PCI levels that qualify, as label values: the selector names them, so it follows the
# inventory (a level nobody has any more drops out).
levels contains l if {
	some c in data.kubernetes.managedclusters
	l := c.metadata.labels["pci-level"]
	to_number(l) >= 2
}

level_values := sort([l | some l in levels]) if count(levels) > 0
else := ["none"]

requiredClusterSelector := {"labelSelector": {
	"matchLabels": {"region": "eu"},
	"matchExpressions": [{"key": "pci-level", "operator": "In", "values": level_values}],
}} if pci

annotations["regent.dev/compliance"] := "eu-pci>=2" if pci

errors contains msg if {
	pci
	some p in input.placement.spec.predicates
	region := p.requiredClusterSelector.labelSelector.matchLabels.region
	region != "eu"
	msg := sprintf("Placement %s asks for region %s: namespace %s may only place on EU clusters with PCI level >= 2", [input.placement.metadata.name, region, input.namespace.name])
}
`

// brokenForBoom evaluates with a conflict (two values for one complete rule) for a Placement
// named boom only: a policy whose evaluation fails.
const brokenForBoom = `package regent.placement

flavour := "a" if input.placement.metadata.name == "boom"

flavour := "b" if input.placement.metadata.name == "boom"
`

type placementEnv struct {
	t        testing.TB
	ctx      context.Context
	f        *fleet.Fleet
	admin    client.Client
	kube     kubernetes.Interface
	identity *rest.Config
}

// startPlacementEnv starts a hub of its own (the webhook configuration is cluster-wide), installs
// deploy/hub's RBAC and runs the placement engine, its webhook and its remediator as `regent hub
// --placement-api-addr` does, under the hub's ServiceAccount. With webhook the apiserver calls
// the webhook through deploy/hub/placement-webhook.yaml's configuration (pointed at the test's
// listener).
func startPlacementEnv(t testing.TB, admission AdmissionOptions, webhook bool) *placementEnv {
	t.Helper()
	f := fleettest.Start(t, fleet.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	admin, err := client.New(f.Hub.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	e := &placementEnv{t: t, ctx: ctx, f: f, admin: admin, kube: kubernetes.NewForConfigOrDie(f.Hub.Config)}
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubNamespace}})
	e.applyYAML("../../deploy/hub/rbac.yaml")
	e.identity = e.serviceAccountConfig("regent-hub")

	certs, err := selfsigned.Write(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Serve(sctx, e.identity, Options{CertFile: certs.CertFile, KeyFile: certs.KeyFile, Namespace: hubNamespace, Admission: admission}, ln)
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	if webhook {
		e.registerWebhook("https://"+ln.Addr().String()+AdmissionPath, certs.CAPEM)
	}
	return e
}

func (e *placementEnv) create(o client.Object) {
	e.t.Helper()
	if err := e.admin.Create(e.ctx, o); err != nil {
		e.t.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
}

// applyYAML creates every object of a multi-document manifest; namespaced objects without a
// namespace land in hubNamespace, as deploy/hub's kustomization puts them.
func (e *placementEnv) applyYAML(path string) {
	e.t.Helper()
	for _, u := range readManifests(e.t, path) {
		if namespaced, err := e.admin.IsObjectNamespaced(u); err != nil {
			e.t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		} else if namespaced && u.GetNamespace() == "" {
			u.SetNamespace(hubNamespace)
		}
		e.create(u)
	}
}

func readManifests(t testing.TB, path string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	d := yamlutil.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// registerWebhook creates deploy/hub's MutatingWebhookConfiguration with its Service reference
// replaced by url and the CA bundle cert-manager would inject.
func (e *placementEnv) registerWebhook(url string, caPEM []byte) {
	e.t.Helper()
	for _, u := range readManifests(e.t, "../../deploy/hub/placement-webhook.yaml") {
		if u.GetKind() != "MutatingWebhookConfiguration" {
			continue
		}
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cfg); err != nil {
			e.t.Fatal(err)
		}
		for i := range cfg.Webhooks {
			if p := cfg.Webhooks[i].ClientConfig.Service.Path; p == nil || *p != AdmissionPath {
				e.t.Fatalf("the manifest's webhook path is %v, the hub serves %s", p, AdmissionPath)
			}
			cfg.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM}
		}
		e.create(cfg)
		return
	}
	e.t.Fatal("deploy/hub/placement-webhook.yaml has no MutatingWebhookConfiguration")
}

func (e *placementEnv) serviceAccountConfig(name string) *rest.Config {
	e.t.Helper()
	ttl := int64(3600)
	tr, err := e.kube.CoreV1().ServiceAccounts(hubNamespace).CreateToken(e.ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(e.f.Hub.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

func (e *placementEnv) policy(name, rego string) {
	e.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: hubNamespace, Labels: map[string]string{PolicyLabel: PolicyLabelValue}},
		Data: map[string]string{name + ".rego": rego}}
	e.create(cm)
	fleettest.Eventually(e.t, 30*time.Second, func() (bool, string) {
		got := &corev1.ConfigMap{}
		if err := e.admin.Get(e.ctx, client.ObjectKeyFromObject(cm), got); err != nil {
			return false, err.Error()
		}
		return got.Annotations[StatusAnnotation] == `{"status":"ok"}`, "policy " + name + " status: " + got.Annotations[StatusAnnotation]
	})
}

const clusterSet = "pci-fleet"

// cluster registers a ManagedCluster in the test's cluster set, with its namespace for replicas.
func (e *placementEnv) cluster(name, region, level string) {
	e.t.Helper()
	e.create(&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"region": region, "pci-level": level, clusterv1beta2.ClusterSetLabel: clusterSet}},
		Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}})
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

func (e *placementEnv) namespace(name string, labels map[string]string) {
	e.t.Helper()
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
	e.create(&clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Name: clusterSet, Namespace: name},
		Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: clusterSet}})
}

func newPlacement(namespace, name string, preds ...clusterv1beta1.ClusterPredicate) *clusterv1beta1.Placement {
	return &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: clusterv1beta1.PlacementSpec{ClusterSets: []string{clusterSet}, Predicates: preds}}
}

func (e *placementEnv) placement(namespace, name string) *clusterv1beta1.Placement {
	e.t.Helper()
	p := &clusterv1beta1.Placement{}
	if err := e.admin.Get(e.ctx, client.ObjectKey{Namespace: namespace, Name: name}, p); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// decisions is the union of a Placement's PlacementDecisions, sorted.
func (e *placementEnv) decisions(namespace, name string) []string {
	e.t.Helper()
	list := &clusterv1beta1.PlacementDecisionList{}
	if err := e.admin.List(e.ctx, list, client.InNamespace(namespace), client.MatchingLabels{clusterv1beta1.PlacementLabel: name}); err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, d := range list.Items {
		for _, c := range d.Status.Decisions {
			out = append(out, c.ClusterName)
		}
	}
	sort.Strings(out)
	return out
}

func (e *placementEnv) eventuallyDecisions(namespace, name string, want ...string) {
	e.t.Helper()
	fleettest.Eventually(e.t, 60*time.Second, func() (bool, string) {
		got := e.decisions(namespace, name)
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("decisions of %s/%s: %v, want %v", namespace, name, got, want)
	})
}

// eventuallyEvent waits for an Event with reason on the named object of namespace whose message
// contains mention.
func (e *placementEnv) eventuallyEvent(namespace, involved, reason, mention string) {
	e.t.Helper()
	fleettest.Eventually(e.t, 30*time.Second, func() (bool, string) {
		evs, err := e.kube.CoreV1().Events(namespace).List(e.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + involved + ",reason=" + reason})
		if err != nil {
			return false, err.Error()
		}
		var msgs []string
		for _, ev := range evs.Items {
			if strings.Contains(ev.Message, mention) {
				return true, ""
			}
			msgs = append(msgs, ev.Message)
		}
		return false, fmt.Sprintf("no %s Event on %s/%s mentioning %q (have %q)", reason, namespace, involved, mention, msgs)
	})
}

func (e *placementEnv) relabel(cluster, key, value string) {
	e.t.Helper()
	fleettest.Edit(e.t, e.admin, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster}}, func(c *clusterv1.ManagedCluster) {
		c.Labels[key] = value
	})
}

func regionPredicate(region string) clusterv1beta1.ClusterPredicate {
	return clusterv1beta1.ClusterPredicate{RequiredClusterSelector: clusterv1beta1.ClusterSelector{
		LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"region": region}}}}
}

// The seed's example end to end, on a real hub with OCM's placement controller and Regent's
// propagator: what a PCI namespace's Placement asks for outside the EU is refused with the
// policy's message, an allowed one gets the required selector and OCM decides only EU/PCI
// clusters, and when a cluster loses its PCI level the decisions and the root policy's replicas
// move off it.
func TestPlacementAdmission_EUPCIEndToEnd(t *testing.T) {
	e := startPlacementEnv(t, AdmissionOptions{}, true)
	e.cluster("eu-1", "eu", "3")
	e.cluster("eu-2", "eu", "2")
	e.cluster("eu-3", "eu", "1")
	e.cluster("us-1", "us", "3")
	e.create(&clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: clusterSet}})
	e.namespace("payments", map[string]string{"compliance": "pci"})
	e.namespace("blog", nil)
	if _, err := e.f.StartPlacementController(""); err != nil {
		t.Fatal(err)
	}

	// No placement policy yet: the webhook admits unchanged (fail open).
	e.create(newPlacement("payments", "early"))
	if p := e.placement("payments", "early"); p.Annotations[AppliedAnnotation] != "" || len(p.Spec.Predicates) != 0 {
		t.Fatalf("admitted with no policy loaded, yet changed: %+v %+v", p.Annotations, p.Spec.Predicates)
	}
	e.eventuallyDecisions("payments", "early", "eu-1", "eu-2", "eu-3", "us-1")

	e.policy("eu-pci", euPCIPolicy)

	t.Run("ExistingPlacementIsRemediatedWhenThePolicyArrives", func(t *testing.T) {
		e.eventuallyEvent("payments", "early", ReasonRemediated, "spec.predicates")
		e.eventuallyDecisions("payments", "early", "eu-1", "eu-2")
	})

	t.Run("DeniedWithThePolicysMessage", func(t *testing.T) {
		err := e.admin.Create(e.ctx, newPlacement("payments", "to-us", regionPredicate("us")))
		want := "Placement to-us asks for region us: namespace payments may only place on EU clusters with PCI level >= 2"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("create: %v, want a denial saying %q", err, want)
		}
		e.eventuallyEvent("payments", "payments", ReasonDenied, want)
	})

	t.Run("AllowedGetsTheSelectorAndOnlyEUPCIDecisions", func(t *testing.T) {
		user := clusterv1beta1.ClusterPredicate{RequiredClusterSelector: clusterv1beta1.ClusterSelector{
			LabelSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "region", Operator: metav1.LabelSelectorOpExists}}}}}
		e.create(newPlacement("payments", "pl", user))
		p := e.placement("payments", "pl")
		if p.Annotations["regent.dev/compliance"] != "eu-pci>=2" || p.Annotations[AppliedAnnotation] == "" {
			t.Errorf("annotations %v: want the policy's and Regent's record", p.Annotations)
		}
		wantPreds := combinePredicates([]clusterv1beta1.ClusterPredicate{user}, []clusterv1beta1.ClusterPredicate{{RequiredClusterSelector: clusterv1beta1.ClusterSelector{
			LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pci-level", Operator: metav1.LabelSelectorOpIn, Values: []string{"2", "3"}}}}}}})
		if !samePredicates(p.Spec.Predicates, wantPreds) {
			t.Errorf("predicates %+v, want %+v", p.Spec.Predicates, wantPreds)
		}
		e.eventuallyDecisions("payments", "pl", "eu-1", "eu-2")

		// Another namespace is not the policy's business.
		e.create(newPlacement("blog", "pl", regionPredicate("us")))
		if b := e.placement("blog", "pl"); len(b.Annotations) != 0 || len(b.Spec.Predicates) != 1 {
			t.Errorf("blog's Placement changed: %v %+v", b.Annotations, b.Spec.Predicates)
		}
		e.eventuallyDecisions("blog", "pl", "us-1")

		// An update that keeps the author's predicates is a fixed point: nothing is added twice.
		fleettest.Edit(t, e.admin, &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "pl", Namespace: "payments"}}, func(p *clusterv1beta1.Placement) {
			p.Labels = map[string]string{"team": "payments"}
		})
		if got := e.placement("payments", "pl"); !samePredicates(got.Spec.Predicates, wantPreds) {
			t.Errorf("after an unrelated update: %+v, want %+v", got.Spec.Predicates, wantPreds)
		}
	})

	t.Run("ALabelChangeMovesDecisionsAndReplicas", func(t *testing.T) {
		mgr, err := hub.NewManager(e.identity, hub.Options{MetricsBindAddress: "0"})
		if err != nil {
			t.Fatal(err)
		}
		fleettest.StartManager(t, mgr)
		e.create(&policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "pci-baseline", Namespace: "payments"},
			Spec: policyv1.PolicySpec{RemediationAction: policyv1.Inform, PolicyTemplates: []*policyv1.PolicyTemplate{{
				ObjectDefinition: runtime.RawExtension{Raw: []byte(`{"apiVersion":"policy.open-cluster-management.io/v1","kind":"ConfigurationPolicy","metadata":{"name":"pci-baseline"},"spec":{"severity":"high","object-templates":[]}}`)}}}}})
		e.create(&policyv1.PlacementBinding{ObjectMeta: metav1.ObjectMeta{Name: "pci-baseline", Namespace: "payments"},
			PlacementRef: policyv1.PlacementSubject{APIGroup: clusterv1beta1.GroupName, Kind: "Placement", Name: "pl"},
			Subjects:     []policyv1.Subject{{APIGroup: policyv1.GroupVersion.Group, Kind: "Policy", Name: "pci-baseline"}}})
		replicas := func() []string {
			var out []string
			for _, c := range []string{"eu-1", "eu-2", "eu-3", "us-1"} {
				p := &policyv1.Policy{}
				if err := e.admin.Get(e.ctx, client.ObjectKey{Namespace: c, Name: "payments.pci-baseline"}, p); err == nil {
					out = append(out, c)
				} else if !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
			}
			return out
		}
		eventuallyReplicas := func(want ...string) {
			t.Helper()
			fleettest.Eventually(t, 60*time.Second, func() (bool, string) {
				got := replicas()
				return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("replicas on %v, want %v", got, want)
			})
		}
		eventuallyReplicas("eu-1", "eu-2")

		// eu-2 loses its PCI level: level 2 is nobody's any more, so the remediator narrows the
		// selector to level 3 and OCM drops eu-2; the propagator takes the replica off it.
		e.relabel("eu-2", "pci-level", "1")
		e.eventuallyEvent("payments", "pl", ReasonRemediated, `"values":["3"]`)
		e.eventuallyDecisions("payments", "pl", "eu-1")
		eventuallyReplicas("eu-1")

		// eu-3 is certified at level 2: the selector widens again and the replica follows.
		e.relabel("eu-3", "pci-level", "2")
		e.eventuallyDecisions("payments", "pl", "eu-1", "eu-3")
		eventuallyReplicas("eu-1", "eu-3")
		if got := e.placement("payments", "pl").Spec.Predicates; len(got) != 1 ||
			fmt.Sprint(got[0].RequiredClusterSelector.LabelSelector.MatchExpressions) != "[{region Exists []} {region In [eu]} {pci-level In [2 3]}]" {
			t.Errorf("predicates after remediation %+v", got)
		}
	})

	t.Run("LeastPrivilege", func(t *testing.T) { testLeastPrivilege(t, e) })

	t.Run("FailsClosedWhenThePolicyCannotBeEvaluated", func(t *testing.T) {
		e.policy("broken-for-boom", brokenForBoom)
		err := e.admin.Create(e.ctx, newPlacement("payments", "boom"))
		if err == nil || !strings.Contains(err.Error(), "fails closed") {
			t.Fatalf("create: %v, want a fail-closed denial", err)
		}
		e.eventuallyEvent("payments", "payments", ReasonEvalFailed, "conflict")
		// Others still evaluate.
		e.create(newPlacement("payments", "fine"))
		if p := e.placement("payments", "fine"); p.Annotations[AppliedAnnotation] == "" {
			t.Errorf("fine was not given the selector: %v", p.Annotations)
		}
	})
}

// The hub's identity reaches Placements only through patch: it cannot create or delete them, nor
// read ConfigMaps outside its own namespace.
func testLeastPrivilege(t *testing.T, e *placementEnv) {
	c, err := client.New(e.identity, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	forbidden := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want Forbidden", what, err)
		}
	}
	forbidden("delete a Placement", c.Delete(e.ctx, newPlacement("payments", "pl")))
	forbidden("create a Placement", c.Create(e.ctx, newPlacement("payments", "sneaky")))
	forbidden("list ConfigMaps of another namespace", c.List(e.ctx, &corev1.ConfigMapList{}, client.InNamespace("payments")))
}

// Dry run: the remediator reports what the policy would change, as Events, and changes nothing.
func TestPlacementRemediation_DryRunChangesNothing(t *testing.T) {
	// No webhook registered: Placements are created as written, as while the hub was down.
	e := startPlacementEnv(t, AdmissionOptions{DryRun: true}, false)
	e.cluster("eu-1", "eu", "3")
	e.namespace("payments", map[string]string{"compliance": "pci"})
	e.create(newPlacement("payments", "pl", regionPredicate("eu")))
	before := e.placement("payments", "pl")

	e.policy("eu-pci", euPCIPolicy)
	e.eventuallyEvent("payments", "pl", ReasonWouldRemediate, `"values":["3"]`)
	after := e.placement("payments", "pl")
	if after.ResourceVersion != before.ResourceVersion || len(after.Annotations) != 0 {
		t.Errorf("dry run changed the Placement: resourceVersion %s → %s, annotations %v", before.ResourceVersion, after.ResourceVersion, after.Annotations)
	}
}
