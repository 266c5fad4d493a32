package fleet

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
)

// The pod network of a fleet's real node: a Linux bridge the fleet creates before any apiserver
// starts, whose gateway address is also where the hub's and the node cluster's apiservers serve,
// so pods reach both without leaving the host. The bridge CNI plugin attaches pods to it.
// A private (RFC 1918) range: go-containerregistry then speaks plain http to a registry served
// on the gateway, as it does for loopback.
const (
	nodeBridge          = "regent0"
	podSubnet           = "10.217.0.0/24"
	podGateway          = "10.217.0.1"
	serviceCIDR         = "10.0.0.0/24" // envtest's default; the `kubernetes` Service is its first address
	kubernetesServiceIP = "10.0.0.1"
)

// NodeAddress is the address pods reach the host on: the hub and a real node's cluster serve
// there, and so must anything else their pods call (a registry, an https server).
const NodeAddress = podGateway

// createBridge brings up the pod bridge with the gateway address for the fleet rooted at self. One real-node fleet per host:
// its kube-proxy owns the host's Service rules, so a bridge a live fleet created means another
// fleet has a node; one no live fleet owns is a dead fleet's (whose root may already be gone:
// a sweep without node support removed it) and is cleaned away with the rest of its host state.
func createBridge(self, kubenode string) error {
	if _, err := net.InterfaceByName(nodeBridge); err == nil {
		if owner := liveBridgeOwner(self); owner != "" {
			return fmt.Errorf("bridge %s exists: fleet %s has a real node on this host (one at a time)", nodeBridge, owner)
		}
		sweepHostLeftovers(filepath.Dir(self), kubenode)
	}
	for _, args := range [][]string{
		{"link", "add", nodeBridge, "type", "bridge"},
		{"addr", "add", podGateway + "/24", "dev", nodeBridge},
		{"link", "set", nodeBridge, "up"},
	} {
		if err := ipCommand(args...); err != nil {
			_ = deleteBridge()
			return err
		}
	}
	return nil
}

func deleteBridge() error {
	if _, err := net.InterfaceByName(nodeBridge); err != nil {
		return nil
	}
	return ipCommand("link", "del", nodeBridge)
}

func ipCommand(args ...string) error {
	ip, err := lookPath("ip")
	if err != nil {
		return err
	}
	if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}
