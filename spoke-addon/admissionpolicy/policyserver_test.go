package admissionpolicy

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet/fleettest"
)

func TestPolicyServer_StatefulSetServicesCacheAndSecretsOwnedByIt(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	// In-cluster configuration: webhooks call the Service, trusting the serving Secret's CA.
	c := startController(t, hub.Config, func(o *Options) { o.WebhookURL, o.CABundle = nil, nil })
	ctx := context.Background()
	ps := &kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: kubewardenv1.PolicyServerSpec{Image: "regent:dev", Replicas: 3, ServiceAccountName: "policy-server"}}
	if err := c.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	get := func(obj client.Object, name string) bool {
		return c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: name}, obj) == nil
	}
	sts := &appsv1.StatefulSet{}
	eventually(t, "StatefulSet", func() bool { return get(sts, "regent-policy-server-default") })
	pod := sts.Spec.Template.Spec
	if *sts.Spec.Replicas != 3 || sts.Spec.ServiceName != "regent-policy-server-default-replicas" || pod.ServiceAccountName != "policy-server" ||
		pod.Containers[0].Image != "regent:dev" {
		t.Errorf("StatefulSet spec = %+v", sts.Spec)
	}
	for _, arg := range []string{"policy-server", "--lifecycle", "--policy-server=default", "--namespace=" + testNamespace,
		"--replica-from-hostname", "--signed-cache=/cache", "--advertise-address=$(POD_IP)"} {
		if !slices.Contains(pod.Containers[0].Args, arg) {
			t.Errorf("args %v lack %s", pod.Containers[0].Args, arg)
		}
	}
	svc, headless := &corev1.Service{}, &corev1.Service{}
	eventually(t, "Services", func() bool {
		return get(svc, "regent-policy-server-default") && get(headless, "regent-policy-server-default-replicas")
	})
	if svc.Spec.Ports[0].Port != ServicePort || headless.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("services: %+v / %+v", svc.Spec, headless.Spec)
	}

	signing, serving := &corev1.Secret{}, &corev1.Secret{}
	eventually(t, "signing and serving Secrets", func() bool {
		return get(signing, "regent-policy-server-default-signing") && get(serving, "regent-policy-server-default-tls")
	})
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(signing.Data["ca.crt"]) {
		t.Fatal("signing Secret's ca.crt is not PEM")
	}
	verify := func(what string, certPEM []byte, usage x509.ExtKeyUsage) {
		b, _ := pem.Decode(certPEM)
		if b == nil {
			t.Fatalf("%s is not PEM", what)
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("%s does not chain to the CA: %v", what, err)
		}
	}
	verify("signer.crt", signing.Data["signer.crt"], x509.ExtKeyUsageCodeSigning)
	if len(signing.Data["transfer.token"]) < 32 {
		t.Errorf("signing Secret has no transfer token for replicas to fetch entries from the leader with: %v", signing.Data)
	}
	bundle := &corev1.ConfigMap{}
	eventually(t, "CA bundle", func() bool { return get(bundle, "regent-policy-server-default-ca-bundle") })
	roots = x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(bundle.Data["ca-bundle.crt"])) {
		t.Fatal("the CA bundle is not PEM")
	}
	verify("tls.crt", serving.Data["tls.crt"], x509.ExtKeyUsageServerAuth)
	key := &corev1.Secret{}
	eventually(t, "signing key Secret", func() bool { return get(key, "regent-policy-server-default-signing-key") })
	if len(key.Data["signer.key"]) == 0 || signing.Data["signer.key"] != nil || signing.Type != corev1.SecretTypeOpaque {
		t.Errorf("signing Secrets: type %s, keys %d, the key's %d: want the key apart", signing.Type, len(signing.Data), len(key.Data))
	}
	for _, o := range []client.Object{sts, svc, headless, signing, serving, bundle} {
		if refs := o.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != ps.UID {
			t.Errorf("%T %s owners = %v, want the PolicyServer", o, o.GetName(), refs)
		}
	}

	liveLeases(t, c, "default", 0)
	if err := c.Create(ctx, clusterPolicy("in-cluster", "default")); err != nil {
		t.Fatal(err)
	}
	report(t, c, "clusterwide-in-cluster-g1", append(readyOn(metav1.ConditionTrue, 0), initializedTrue())...)
	w := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	eventually(t, "webhook configuration", func() bool {
		return c.Get(ctx, client.ObjectKey{Name: webhookName("clusterwide-in-cluster")}, w) == nil
	})
	cc := w.Webhooks[0].ClientConfig
	if cc.Service == nil || cc.Service.Name != "regent-policy-server-default" || cc.Service.Namespace != testNamespace ||
		*cc.Service.Path != "/validate/clusterwide-in-cluster/1" || !bytes.Equal(cc.CABundle, []byte(bundle.Data["ca-bundle.crt"])) {
		t.Errorf("client config = %+v, want the Service with the serving CA bundle", cc)
	}

	update(t, c, ps, func() { ps.Spec.Replicas = 2 })
	eventually(t, "StatefulSet follows replicas", func() bool { return get(sts, sts.Name) && *sts.Spec.Replicas == 2 })
	eventually(t, "PolicyServer says Deployed", func() bool {
		return c.Get(ctx, client.ObjectKeyFromObject(ps), ps) == nil && meta.IsStatusConditionTrue(ps.Status.Conditions, "Deployed")
	})
}
