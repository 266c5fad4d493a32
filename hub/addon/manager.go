package addon

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"open-cluster-management.io/addon-framework/pkg/addonmanager"
	"open-cluster-management.io/addon-framework/pkg/utils"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"regent.dev/regent/addonidentity"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/version"
)

// DefaultImage is the image the agent Deployment runs: Regent's image at this binary's version, so
// a hub delivers agents of its own release (never a moving tag).
var DefaultImage = version.Image()

// LeaderElectionID is the Lease the addon manager's replicas elect a leader with.
const LeaderElectionID = "regent-addon-manager"

// Options configure the addon manager.
type Options struct {
	// Image runs the spoke addon on managed clusters; DefaultImage when empty.
	Image string
	// LeaderElection runs the addon manager only in the replica holding the Lease
	// LeaderElectionID in LeaderElectionNamespace.
	LeaderElection          bool
	LeaderElectionNamespace string
}

// Run runs addon-framework's addon manager until ctx ends: the ClusterManagementAddOn ensured,
// ManagedClusterAddOns owned by it, agents registered and delivered. addon-framework does not
// elect a leader (OCM's cluster-manager wraps it in one); with opts.LeaderElection, all of it
// runs only in the replica that holds the Lease, and a replica that loses it stops.
func Run(ctx context.Context, hub *rest.Config, opts Options) error {
	if opts.Image == "" {
		opts.Image = DefaultImage
	}
	owners, err := ctrl.NewManager(hub, ctrl.Options{
		Scheme: scheme.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		LeaderElection: opts.LeaderElection, LeaderElectionID: LeaderElectionID,
		LeaderElectionNamespace: opts.LeaderElectionNamespace, LeaderElectionReleaseOnCancel: true,
		// controller-runtime#3538: the v0.23 priority queue can deadlock at shutdown.
		Controller: config.Controller{UsePriorityQueue: ptr.To(false)},
	})
	if err != nil {
		return err
	}
	if err := (&ownerReconciler{client: owners.GetClient()}).setup(owners); err != nil {
		return err
	}
	direct, err := client.New(hub, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	addons, err := addonclient.NewForConfig(hub)
	if err != nil {
		return err
	}
	agent := &agentAddon{image: opts.Image, hub: direct, configs: utils.NewAddOnDeploymentConfigGetter(addons)}
	// A runnable without NeedLeaderElection runs only once this replica leads.
	err = owners.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if err := EnsureClusterManagementAddOn(ctx, direct); err != nil {
			return err
		}
		mgr, err := addonmanager.New(hub)
		if err != nil {
			return fmt.Errorf("addon manager: %w", err)
		}
		if err := mgr.AddAgent(agent); err != nil {
			return err
		}
		if err := mgr.Start(ctx); err != nil {
			return fmt.Errorf("addon manager: %w", err)
		}
		<-ctx.Done()
		return nil
	}))
	if err != nil {
		return err
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
			// An AddOnDeploymentConfig places the agent, mirrors its image, sets its proxy,
			// resources and namespace (deploy/hub/clustermanagementaddon.yaml names a default).
			SupportedConfigs: []addonv1alpha1.ConfigMeta{{ConfigGroupResource: addonv1alpha1.ConfigGroupResource{
				Group: utils.AddOnDeploymentConfigGVR.Group, Resource: utils.AddOnDeploymentConfigGVR.Resource}}},
			InstallStrategy: addonv1alpha1.InstallStrategy{Type: addonv1alpha1.AddonInstallStrategyManual},
		},
	}
	if err := c.Create(ctx, cma); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("ClusterManagementAddOn %s: %w", cma.Name, err)
	}
	return nil
}
