package fleet

// StartPlacementController runs OCM's own placement controller (`ocm placement controller`)
// against the hub, so Placements get real PlacementDecisions (decision groups included). It stops
// with the fleet.
func (f *Fleet) StartPlacementController(binDir string) (*Process, error) {
	if binDir == "" {
		binDir = DefaultBinDir()
	}
	bin, err := Binary(binDir, OCMBinary)
	if err != nil {
		return nil, err
	}
	// Its health and metrics endpoint defaults to :8443, which another fleet on this machine may
	// hold (tests run in parallel); it cannot serve on port 0, so a free port is picked here.
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	return f.startOCM("placement", bin, "placement", "controller", "--kubeconfig="+f.Hub.Kubeconfig,
		"--disable-leader-election", "--namespace="+OCMHubNamespace, "--listen="+addr)
}
