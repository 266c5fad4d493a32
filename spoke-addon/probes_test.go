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

// The probes the delivered Deployment uses: /healthz answers while the process runs; /readyz
// only once the addon reached the hub too, so an agent whose hub is unreachable is kept out of
// "ready", not restarted.
func TestProbes_ReadyOnlyOnceTheHubIsReached(t *testing.T) {
	f := fleettest.Start(t, fleet.Options{Managed: []fleet.ClusterSpec{{Name: "cluster1"}}})
	px, viaProxy := startProxy(t, addonHubIdentity(t, f.Hub, "cluster1"))
	px.cut()

	addr := fleettest.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := spokeaddon.New(spokeaddon.Options{Hub: viaProxy, Local: f.Managed[0].Config, ClusterName: "cluster1",
		ExternalConfigPolicy: true, ExternalAdmissionPolicy: true, HealthProbeBindAddress: addr})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	status := func(path string) (int, error) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		code, err := status("/healthz")
		return code == http.StatusOK, fmt.Sprintf("/healthz: %d %v", code, err)
	})
	if code, err := status("/readyz"); err != nil || code == http.StatusOK {
		t.Errorf("/readyz answered %d %v with the hub unreachable", code, err)
	}
	px.restore()
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		code, err := status("/readyz")
		return code == http.StatusOK, fmt.Sprintf("/readyz: %d %v", code, err)
	})
}
