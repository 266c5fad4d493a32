package spokeaddon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// addProbes: alive while the process answers; ready once the managed cluster's cache has synced
// and the hub answers the addon's identity in its cluster namespace (a hub kubeconfig OCM has not
// issued yet, or a hub out of reach, keeps it unready rather than restarting it). Nothing routes
// traffic to the addon, so readiness is what `kubectl rollout status` and the ManagedClusterAddOn's
// user see.
func addProbes(mgr manager.Manager, hub cluster.Cluster, clusterName string) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("clusters", func(req *http.Request) error {
		// Answer within the probe's own timeout: a cache that has not synced blocks, a hub out
		// of reach hangs until the dial gives up.
		ctx, cancel := context.WithTimeout(req.Context(), 2*time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("managed cluster cache not synced")
		}
		if err := hub.GetAPIReader().List(ctx, &policyv1.PolicyList{}, client.InNamespace(clusterName), client.Limit(1)); err != nil {
			return fmt.Errorf("hub: %w", err)
		}
		return nil
	})
}
