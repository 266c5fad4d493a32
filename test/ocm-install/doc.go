// Package ocminstall installs Regent on a fleet that runs OCM's own components (the fleet's
// OCMAgents option): clusters join through OCM's registration with a bootstrap token and a signed
// CSR, OCM's work agent applies ManifestWorks, and Regent's addon gets its hub identity from OCM's
// addon registration and its Available condition from OCM's lease check, as on a production hub.
package ocminstall
