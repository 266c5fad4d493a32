package fleet

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
	return f.StartProcess("placement", bin, "controller", "--kubeconfig="+f.Hub.Kubeconfig,
		"--disable-leader-election", "--namespace=open-cluster-management-hub")
}
