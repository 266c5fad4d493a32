package propagator_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/templates"
)

// secretCopyingRoot is a root whose ConfigurationPolicy builds a Secret from the hub Secret
// "creds" of the root's namespace, one value through fromSecret, all through copySecretData.
func (e *env) secretCopyingRoot(name string) {
	e.t.Helper()
	tmpl, err := json.Marshal(map[string]any{
		"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"severity": "low", "object-templates": []any{
			map[string]any{"complianceType": "musthave", "objectDefinition": map[string]any{"apiVersion": "v1", "kind": "Secret",
				"metadata": map[string]any{"name": "one", "namespace": "default"},
				"data":     map[string]any{"pw": fmt.Sprintf(`{{hub fromSecret %q "creds" "pw" hub}}`, e.ns)}}},
			map[string]any{"complianceType": "musthave", "objectDefinition": map[string]any{"apiVersion": "v1", "kind": "Secret",
				"metadata": map[string]any{"name": "all", "namespace": "default"},
				"data":     fmt.Sprintf(`{{hub copySecretData %q "creds" hub}}`, e.ns)}},
		}},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.create(&policyv1.Policy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: policyv1.PolicySpec{RemediationAction: policyv1.Inform,
			PolicyTemplates: []*policyv1.PolicyTemplate{{ObjectDefinition: runtime.RawExtension{Raw: tmpl}}}},
	})
}

// A hub template that reads a Secret puts only ciphertext on the replica, under the cluster's
// key (made on first use in the Secret OCM names, in the cluster namespace) and an IV the replica
// and its template both carry; the IV is kept when the Secret changes, as OCM keeps it.
func TestHubTemplates_SecretValuesReachTheReplicaOnlyEncrypted(t *testing.T) {
	e := newEnv(t)
	c1 := e.cluster("c1", map[string]string{"zone": "a"})
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: e.ns},
		Data: map[string][]byte{"pw": []byte("s3cret"), "user": []byte("admin")}}
	e.create(creds)
	e.startHub()
	e.secretCopyingRoot("p")
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", c1)
	e.expectReplicas("p", c1)

	var rep *policyv1.Policy
	e.eventually("the replica is resolved", func() (bool, string) {
		rep = e.replicas("p")[c1]
		return rep != nil && len(rep.Spec.PolicyTemplates) == 1 && !strings.Contains(string(rep.Spec.PolicyTemplates[0].ObjectDefinition.Raw), "{{hub"),
			fmt.Sprintf("replica %v", rep)
	})
	raw := string(rep.Spec.PolicyTemplates[0].ObjectDefinition.Raw)
	for _, clear := range []string{"s3cret", "czNjcmV0", "admin", "YWRtaW4="} {
		if strings.Contains(raw, clear) {
			t.Errorf("the replica holds %q in clear: %s", clear, raw)
		}
	}
	if strings.Count(raw, templates.EncryptedPrefix) != 3 {
		t.Errorf("want 3 encrypted values (fromSecret, copySecretData's two keys): %s", raw)
	}

	key := &corev1.Secret{}
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: c1, Name: templates.EncryptionKeySecret}, key); err != nil {
		t.Fatalf("the cluster's key Secret: %v", err)
	}
	if len(key.Data["key"]) != templates.KeySize || key.Labels["cluster.open-cluster-management.io/backup"] != "policy" {
		t.Errorf("key Secret: %d-byte key, labels %v", len(key.Data["key"]), key.Labels)
	}
	ivText := rep.Annotations[templates.IVAnnotation]
	iv, err := templates.ParseIV(ivText)
	if err != nil {
		t.Fatalf("replica's IV annotation: %v", err)
	}
	var cp struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(raw), &cp); err != nil {
		t.Fatal(err)
	}
	if cp.Metadata.Annotations[templates.IVAnnotation] != ivText {
		t.Errorf("the template's IV annotation %q, want the replica's %q", cp.Metadata.Annotations[templates.IVAnnotation], ivText)
	}
	plain, err := templates.Decryption{Key: key.Data["key"], IV: iv}.DecryptJSON([]byte(raw))
	if err != nil {
		t.Fatalf("decrypt with the cluster's key: %v", err)
	}
	for _, want := range []string{`"pw":"czNjcmV0"`, `"user":"YWRtaW4="`} {
		if !strings.Contains(string(plain), want) {
			t.Errorf("decrypted template lacks %s: %s", want, plain)
		}
	}

	// A new value of the hub Secret reaches the replica, encrypted under the same IV.
	fleettest.Edit(t, e.c, creds, func(s *corev1.Secret) { s.Data["pw"] = []byte("n3w") })
	e.eventually("the new value reaches the replica", func() (bool, string) {
		rep := e.replicas("p")[c1]
		if rep == nil || len(rep.Spec.PolicyTemplates) == 0 {
			return false, "no replica"
		}
		plain, err := templates.Decryption{Key: key.Data["key"], IV: iv}.DecryptJSON(rep.Spec.PolicyTemplates[0].ObjectDefinition.Raw)
		return err == nil && strings.Contains(string(plain), `"pw":"bjN3"`) && rep.Annotations[templates.IVAnnotation] == ivText,
			fmt.Sprintf("decrypted %s (%v), IV %q", plain, err, rep.Annotations[templates.IVAnnotation])
	})
}

// A key due for rotation (here: a last-rotated annotation 31 days old, as OCM's 30-day schedule
// sees it) is replaced: the old key becomes previousKey, with which the cluster still decrypts,
// and the replicas carrying encrypted values are encrypted again under the new key.
func TestHubTemplates_ARotatedKeyBecomesPreviousKeyAndTheReplicasAreReencrypted(t *testing.T) {
	e := newEnv(t)
	c1 := e.cluster("c1", map[string]string{"zone": "a"})
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: e.ns},
		Data: map[string][]byte{"pw": []byte("s3cret"), "user": []byte("admin")}})
	old, _ := templates.NewKey()
	key := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: templates.EncryptionKeySecret, Namespace: c1,
		Annotations: map[string]string{templates.LastRotatedAnnotation: time.Now().UTC().Format(time.RFC3339)}},
		Data: map[string][]byte{"key": old}}
	e.create(key)
	e.startHub()
	e.secretCopyingRoot("p")
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", c1)
	decrypts := func(rep *policyv1.Policy, d templates.Decryption) bool {
		if rep == nil || len(rep.Spec.PolicyTemplates) == 0 {
			return false
		}
		iv, err := templates.ParseIV(rep.Annotations[templates.IVAnnotation])
		if err != nil {
			return false
		}
		d.IV = iv
		plain, err := d.DecryptJSON(rep.Spec.PolicyTemplates[0].ObjectDefinition.Raw)
		return err == nil && strings.Contains(string(plain), `"pw":"czNjcmV0"`)
	}
	e.eventually("the replica is encrypted under the current key", func() (bool, string) {
		return decrypts(e.replicas("p")[c1], templates.Decryption{Key: old}), "replica not decryptable with the key"
	})

	fleettest.Edit(t, e.c, key, func(s *corev1.Secret) {
		s.Annotations[templates.LastRotatedAnnotation] = time.Now().Add(-31 * 24 * time.Hour).UTC().Format(time.RFC3339)
	})
	var rotated corev1.Secret
	e.eventually("the key is rotated", func() (bool, string) {
		if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(key), &rotated); err != nil {
			return false, err.Error()
		}
		return !bytes.Equal(rotated.Data["key"], old) && bytes.Equal(rotated.Data["previousKey"], old),
			fmt.Sprintf("key changed %v, previousKey is the old key %v", !bytes.Equal(rotated.Data["key"], old), bytes.Equal(rotated.Data["previousKey"], old))
	})
	if last, err := time.Parse(time.RFC3339, rotated.Annotations[templates.LastRotatedAnnotation]); err != nil || time.Since(last) > time.Hour {
		t.Errorf("last-rotated after the rotation: %q (%v)", rotated.Annotations[templates.LastRotatedAnnotation], err)
	}
	e.eventually("the replica is encrypted again under the new key", func() (bool, string) {
		return decrypts(e.replicas("p")[c1], templates.Decryption{Key: rotated.Data["key"]}), "replica not decryptable with the new key alone"
	})
}
