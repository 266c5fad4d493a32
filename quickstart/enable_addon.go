package quickstart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet"
	spokeaddon "regent.dev/regent/spoke-addon"
)

// enableAddon enables the addon regent on every managed cluster the way an OCM user does under
// the Manual install strategy (`clusteradm addon enable`): a ManagedClusterAddOn in each cluster
// namespace. The fleet then plays OCM's registration agent, so each shows Available while its
// spoke addon renews the Lease.
func enableAddon(ctx context.Context, f *fleet.Fleet) error {
	c, err := client.New(f.Hub.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	for _, cluster := range f.Managed {
		mca := &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Name, Name: spokeaddon.AddonName}}
		if err := c.Create(ctx, mca); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("enable addon %s on %s: %w", spokeaddon.AddonName, cluster.Name, err)
		}
	}
	logs := filepath.Join(f.Dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	// Beside the logs of Regent's processes, where the guide sends a user who wonders why an
	// addon is not Available.
	out, err := os.Create(filepath.Join(logs, "addon-health.log"))
	if err != nil {
		return err
	}
	return f.StartAddonHealth(ctx, fleet.AddonHealthOptions{Log: zap.New(zap.WriteTo(out))})
}
