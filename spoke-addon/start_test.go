package spokeaddon_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	spokeaddon "regent.dev/regent/spoke-addon"
)

// A pod can start before its cluster's Service IP routes. The addon waits for its managed
// cluster's apiserver instead of exiting (which a Deployment would count as a restart), and
// starts once the route exists.
func TestRun_WaitsForItsClusterInsteadOfExiting(t *testing.T) {
	f := fleettest.Start(t, fleet.Options{Managed: []fleet.ClusterSpec{{Name: "cluster1"}}})
	px, localViaProxy := startProxy(t, f.Managed[0].Config)
	px.cut()

	addr := fleettest.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	// exited closes when Run returns, with its error in runErr: the cleanup and every check can wait on it.
	exited := make(chan struct{})
	var runErr error
	go func() {
		defer close(exited)
		runErr = spokeaddon.Run(ctx, spokeaddon.Options{Hub: addonHubIdentity(t, f.Hub, "cluster1"), Local: localViaProxy,
			ClusterName: "cluster1", ExternalConfigPolicy: true, ExternalAdmissionPolicy: true, HealthProbeBindAddress: addr})
	}()
	t.Cleanup(func() { cancel(); <-exited })

	// Several attempts' worth of an unreachable cluster: the addon is still running.
	select {
	case <-exited:
		t.Fatalf("the addon exited while its cluster was unreachable: %v", runErr)
	case <-time.After(3 * time.Second):
	}
	px.restore()
	fleettest.Eventually(t, 2*time.Minute, func() (bool, string) {
		select {
		case <-exited:
			t.Fatalf("the addon exited: %v", runErr)
		default:
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, fmt.Sprintf("/readyz: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Sprintf("/readyz: %d", resp.StatusCode)
	})
}
