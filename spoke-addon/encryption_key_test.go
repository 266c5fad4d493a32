package spokeaddon_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/templates"
)

// encryptionKeyReachesTheCluster: the key the hub keeps for the cluster (Secret
// policy-encryption-key in its namespace) is copied to the cluster namespace on the managed
// cluster, where ConfigurationPolicies decrypt with it, through the addon's own hub identity
// (which may read that Secret and no other); a rotation on the hub (key and previousKey) reaches
// the copy, and a key deleted on the hub is deleted on the cluster.
func (s *suite) encryptionKeyReachesTheCluster(t *testing.T) {
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "cluster1", Name: templates.EncryptionKeySecret}
	first, _ := templates.NewKey()
	second, _ := templates.NewKey()
	hubKey := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Data: map[string][]byte{"key": first}}
	if err := s.hub.Create(ctx, hubKey); err != nil {
		t.Fatal(err)
	}
	copied := func(want map[string][]byte) func() (bool, string) {
		return func() (bool, string) {
			got := &corev1.Secret{}
			if err := s.local.Get(ctx, key, got); err != nil {
				return false, fmt.Sprintf("local key Secret: %v", err)
			}
			if len(got.Data) != len(want) {
				return false, fmt.Sprintf("local key Secret has %d entries, want %d", len(got.Data), len(want))
			}
			for k, v := range want {
				if !bytes.Equal(got.Data[k], v) {
					return false, fmt.Sprintf("local key Secret's %s differs from the hub's", k)
				}
			}
			return true, ""
		}
	}
	eventually(t, wait, copied(map[string][]byte{"key": first}))

	fleettest.Edit(t, s.hub, hubKey, func(s *corev1.Secret) { s.Data = map[string][]byte{"key": second, "previousKey": first} })
	eventually(t, wait, copied(map[string][]byte{"key": second, "previousKey": first}))

	if err := s.hub.Delete(ctx, hubKey); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, func() (bool, string) {
		err := s.local.Get(ctx, key, &corev1.Secret{})
		return apierrors.IsNotFound(err), fmt.Sprintf("local key Secret still there (%v)", err)
	})
}
