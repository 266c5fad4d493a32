package configpolicy

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/spoke-addon/compliancemessage"
	"regent.dev/regent/templates"
)

// TestEncryptedValues decrypts what hub templates encrypted for the cluster, against a real
// apiserver: refused while the cluster has no key, applied in clear once the key Secret arrives,
// still decrypted through previousKey after the hub rotated the key, refused again when no key
// fits. The policy and the key live in the cluster namespace, as OCM lays them out.
func TestEncryptedValues_DecryptedWithTheKeyAndPreviousKey_RefusedWhenNoneFits(t *testing.T) {
	hub := fleettest.Hub(t)
	c, _ := startController(t, hub.Config, Options{})
	const ns = "enc-cluster1"
	namespace(t, c, ns, nil)
	ctx := context.Background()

	oldKey, _ := templates.NewKey()
	newKey, _ := templates.NewKey()
	iv, _ := templates.NewIV()
	under := func(key []byte, value string) string {
		t.Helper()
		v, err := templates.Encryption{Key: key, IV: iv}.Encrypt(value)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// What a replica's template looks like after hub templates ran: fromSecret's stored (base64)
	// value, encrypted, and a managed-cluster template that uses a decrypted value.
	policy := func(pw string) string {
		return fmt.Sprintf(`apiVersion: policy.open-cluster-management.io/v1
kind: ConfigurationPolicy
metadata:
  name: copied
  namespace: %s
  annotations: {%s: %s}
spec:
  remediationAction: enforce
  severity: low
  object-templates:
  - complianceType: musthave
    objectDefinition:
      apiVersion: v1
      kind: Secret
      metadata: {name: out, namespace: %s}
      data: {pw: '%s'}
  - complianceType: musthave
    objectDefinition:
      apiVersion: v1
      kind: ConfigMap
      metadata: {name: out, namespace: %s}
      data: {pw: '{{ "%s" | base64dec }}'}
`, ns, templates.IVAnnotation, base64.StdEncoding.EncodeToString(iv), ns, pw, ns, pw)
	}
	keySecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: templates.EncryptionKeySecret, Namespace: ns}}
	setKeys := func(key, previous []byte) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			s := &corev1.Secret{}
			err := c.Get(ctx, client.ObjectKeyFromObject(keySecret), s)
			if err != nil {
				s = keySecret.DeepCopy()
			}
			s.Data = map[string][]byte{"key": key}
			if previous != nil {
				s.Data["previousKey"] = previous
			}
			if err != nil {
				return c.Create(ctx, s)
			}
			return c.Update(ctx, s)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	values := func() (secret, cm string) {
		if s, ok := getObject(t, c, "v1", "Secret", ns, "out"); ok {
			secret, _, _ = unstructured.NestedString(s.Object, "data", "pw")
		}
		if m, ok := getObject(t, c, "v1", "ConfigMap", ns, "out"); ok {
			cm, _, _ = unstructured.NestedString(m.Object, "data", "pw")
		}
		return secret, cm
	}

	// Before the hub's key reaches the cluster: refused, nothing applied.
	apply(t, c, policy(under(oldKey, base64.StdEncoding.EncodeToString([]byte("s3cret")))))
	state(t, c, ns, "copied", policyv1.NonCompliant, "policy-encryption-key", "not found")
	if s, cm := values(); s != "" || cm != "" {
		t.Fatalf("applied without a key: Secret %q, ConfigMap %q", s, cm)
	}

	// The key arrives: the objects get the plaintext, and the status does not show it.
	setKeys(oldKey, nil)
	p := state(t, c, ns, "copied", policyv1.Compliant)
	if s, cm := values(); s != "czNjcmV0" || cm != "s3cret" {
		t.Errorf("with the key: Secret data.pw %q (want czNjcmV0), ConfigMap data.pw %q (want s3cret)", s, cm)
	}
	if msg := compliancemessage.Of(p.Status); strings.Contains(msg, "s3cret") {
		t.Errorf("the status shows the plaintext: %s", msg)
	}

	// The hub rotates the key; its replicas still carry values under the old one, now previousKey.
	setKeys(newKey, oldKey)
	apply(t, c, policy(under(oldKey, base64.StdEncoding.EncodeToString([]byte("n3w")))))
	state(t, c, ns, "copied", policyv1.Compliant)
	eventually(t, "a value under the previous key is applied", func() bool {
		s, cm := values()
		return s == "bjN3" && cm == "n3w"
	})

	// Once neither key fits, the policy says so and applies nothing new.
	setKeys(newKey, nil)
	apply(t, c, policy(under(oldKey, base64.StdEncoding.EncodeToString([]byte("l4st")))))
	state(t, c, ns, "copied", policyv1.NonCompliant, "decryption failed")
	if s, cm := values(); s != "bjN3" || cm != "n3w" {
		t.Errorf("a value no key decrypts was applied: Secret %q, ConfigMap %q", s, cm)
	}
}
