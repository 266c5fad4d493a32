package spokeaddon

import (
	"context"
	"errors"
	"net/http"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// addProbes: alive while the process answers; ready once the managed cluster's and the hub's
// caches have synced, i.e. the addon has reached both apiservers with the identities it was given
// (a hub kubeconfig OCM has not issued yet keeps it unready, not restarting).
func addProbes(mgr manager.Manager, hub cluster.Cluster) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("caches", func(req *http.Request) error {
		// A cache that has not synced blocks WaitForCacheSync; answer the probe within its timeout.
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("managed cluster cache not synced")
		}
		if !hub.GetCache().WaitForCacheSync(ctx) {
			return errors.New("hub cache not synced")
		}
		return nil
	})
}
