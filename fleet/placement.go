package fleet

import "net"

// StartPlacementController runs OCM's own placement controller against the hub, so Placements
// get real PlacementDecisions (decision groups included). It stops with the fleet.
func (f *Fleet) StartPlacementController(binDir string) (*Process, error) {
	if binDir == "" {
		binDir = DefaultBinDir()
	}
	bin, err := Binary(binDir, "placement")
	if err != nil {
		return nil, err
	}
	// Its health and metrics endpoint defaults to :8443, which another fleet on this machine may
	// hold (tests run in parallel); it cannot serve on port 0, so a free port is picked here.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	return f.StartProcess("placement", bin, "controller", "--kubeconfig="+f.Hub.Kubeconfig,
		"--disable-leader-election", "--namespace=open-cluster-management-hub", "--listen="+addr)
}
