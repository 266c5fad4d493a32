package main

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"regent.dev/regent/hub"
	"regent.dev/regent/hub/dashboard"
	"regent.dev/regent/memlimit"
	"regent.dev/regent/placement/opa"
)

// withDashboard builds the hub's manager with the dashboard's board on its cache, adds the
// dashboard to what the placement API serves, and returns what runs the hub (as hub.Run does).
func withDashboard(cfg *rest.Config, opts hub.Options, placement *opa.Options) (func(context.Context) error, error) {
	mgr, err := hub.NewManager(cfg, opts)
	if err != nil {
		return nil, err
	}
	board := dashboard.NewBoard(mgr.GetCache(), opts.Clock, mgr.GetLogger().WithName("dashboard")).WithReplicas(mgr.Replicas)
	if err := mgr.Add(board); err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	if placement.Handlers == nil {
		placement.Handlers = map[string]http.Handler{}
	}
	placement.Handlers[dashboard.Path] = dashboard.NewServer(board, opa.NewAuthorizer(kube))
	return func(ctx context.Context) error {
		memlimit.Apply(ctx, opts.MemoryLimit, hub.DefaultMemoryLimit)
		return mgr.Start(ctx)
	}, nil
}
