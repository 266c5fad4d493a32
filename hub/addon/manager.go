package addon

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"open-cluster-management.io/addon-framework/pkg/addonmanager"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"regent.dev/regent/addonidentity"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/version"
)

// DefaultImage is the image the agent Deployment runs: Regent's image at this binary's version, so
// a hub delivers agents of its own release (never a moving tag).
var DefaultImage = version.Image()

// Options configure the addon manager.
type Options struct {
	// Image runs the spoke addon on managed clusters; DefaultImage when empty.
	Image string
}

// Run ensures the ClusterManagementAddOn exists and runs addon-framework's addon manager until
// ctx ends.
func Run(ctx context.Context, hub *rest.Config, opts Options) error {
	if opts.Image == "" {
		opts.Image = DefaultImage
	}
	owners, err := ctrl.NewManager(hub, ctrl.Options{Scheme: scheme.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return err
	}
	c := owners.GetClient()
	if err := (&ownerReconciler{client: c}).setup(owners); err != nil {
		return err
	}
	direct, err := client.New(hub, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	if err := EnsureClusterManagementAddOn(ctx, direct); err != nil {
		return err
	}
	mgr, err := addonmanager.New(hub)
	if err != nil {
		return fmt.Errorf("addon manager: %w", err)
	}
	if err := mgr.AddAgent(&agentAddon{image: opts.Image, hub: direct}); err != nil {
		return err
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("addon manager: %w", err)
	}
	return owners.Start(ctx)
}

// EnsureClusterManagementAddOn creates the hub's ClusterManagementAddOn "regent", installed on
// the clusters a user picks (a ManagedClusterAddOn per cluster, OCM's Manual strategy).
func EnsureClusterManagementAddOn(ctx context.Context, c client.Client) error {
	cma := &addonv1alpha1.ClusterManagementAddOn{
		ObjectMeta: metav1.ObjectMeta{Name: addonidentity.AddonName},
		Spec: addonv1alpha1.ClusterManagementAddOnSpec{
			AddOnMeta: addonv1alpha1.AddOnMeta{
				DisplayName: "Regent",
				Description: "Policy governance: progressive rollout of policy enforcement, dependency-gated templates, per-cluster compliance.",
			},
			InstallStrategy: addonv1alpha1.InstallStrategy{Type: addonv1alpha1.AddonInstallStrategyManual},
		},
	}
	if err := c.Create(ctx, cma); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("ClusterManagementAddOn %s: %w", cma.Name, err)
	}
	return nil
}
