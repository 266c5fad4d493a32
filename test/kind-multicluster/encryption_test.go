package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"regent.dev/regent/templates"
)

// encryptedValueReachesTheClusterInClear: a hub template's protected value crosses the hub only
// encrypted (the replica holds "$ocm_encrypted:…"), the hub makes each cluster's key, the addon
// copies it to its cluster, and the ConfigurationPolicy there creates the Secret with the value
// in clear. protect of a literal, not fromSecret: on kind the hub runs under deploy/hub's RBAC,
// which grants no read of the hub's Secrets (docs/install.md).
func (e *env) encryptedValueReachesTheClusterInClear(t *testing.T) {
	e.apply(t, policyYAML("protected", "type: All",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: e2e-protected, namespace: default}\ndata: {pw: '{{hub \"czNjcmV0\" | protect hub}}'}", "")...)
	for name, c := range e.local {
		eventually(t, 2*time.Minute, func() (bool, string) {
			s := &corev1.Secret{}
			err := c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: "e2e-protected"}, s)
			return err == nil && string(s.Data["pw"]) == "s3cret", fmt.Sprintf("%s: Secret default/e2e-protected with pw s3cret (%v)", name, err)
		})
		rep := e.replica(t, name, "protected")
		if rep == nil || len(rep.Spec.PolicyTemplates) == 0 {
			t.Fatalf("%s: no replica", name)
		}
		raw := string(rep.Spec.PolicyTemplates[0].ObjectDefinition.Raw)
		if strings.Contains(raw, "czNjcmV0") || !strings.Contains(raw, templates.EncryptedPrefix) {
			t.Errorf("%s: the hub's replica holds the value in clear: %s", name, raw)
		}
		key := &corev1.Secret{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: name, Name: templates.EncryptionKeySecret}, key); err != nil {
			t.Errorf("%s: the key Secret on the cluster: %v", name, err)
		}
	}
}
