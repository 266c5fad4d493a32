// Package deploy holds the kustomize bases for the hub and for managed clusters; its test renders
// them with kubectl and has a real apiserver accept every object.
package deploy

import (
	"os/exec"
	"strings"
	"testing"

	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
)

func TestKustomizeBases_RenderAndApplyToARealCluster(t *testing.T) {
	kubectl, err := fleet.Binary(fleet.DefaultBinDir(), "kubectl")
	if err != nil {
		t.Fatal(err)
	}
	// The fleet already has the CRDs; applying them again must be a no-op, and every other
	// object must pass the apiserver's validation.
	hub := fleettest.Hub(t)
	for _, base := range []string{"hub", "spoke"} {
		out, err := exec.Command(kubectl, "--kubeconfig", hub.Kubeconfig, "apply", "--server-side", "--force-conflicts", "-k", base).CombinedOutput()
		if err != nil {
			t.Fatalf("apply -k deploy/%s: %v\n%s", base, err, out)
		}
		if !strings.Contains(string(out), "deployment.apps/regent-") {
			t.Errorf("deploy/%s applied no Deployment:\n%s", base, out)
		}
	}
}
