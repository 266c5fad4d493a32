package addon

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	addonapiv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
)

// AgentManifests are the objects the addon delivers to cluster with the given image, exactly
// as addon-framework renders them into its ManifestWork: what a cluster without OCM's work
// agent (the real-node e2e test) applies itself. addon may be nil (default install namespace).
func AgentManifests(ctx context.Context, image string, cluster *clusterv1.ManagedCluster, addon *addonapiv1beta1.ManagedClusterAddOn) ([]runtime.Object, error) {
	return (&agentAddon{image: image}).Manifests(ctx, cluster, addon)
}
