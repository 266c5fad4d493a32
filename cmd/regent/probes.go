package main

import (
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// addHealthChecks answers /healthz and /readyz once the manager serves them; with no probe
// address there is nothing to answer on.
func addHealthChecks(mgr manager.Manager, addr string) error {
	if addr == "" {
		return nil
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("ping", healthz.Ping)
}
