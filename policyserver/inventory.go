package policyserver

import (
	"context"
	"fmt"
	"time"

	"regent.dev/regent/policyserver/engine"
)

// InventoryReplicator fills a Gatekeeper policy's data.inventory with the cluster's objects of
// the kinds it declares, and keeps it filled until stop is called. The host capabilities
// (capabilities.Host) are one: they already read the kinds a policy's contextAwareResources
// name, with the RBAC that declaration grants.
type InventoryReplicator interface {
	Replicate(ctx context.Context, resources []engine.Resource, inv *engine.Inventory) (stop func(), err error)
}

// inventorySyncTimeout bounds the first list of a policy's inventory kinds. A policy whose
// inventory cannot be listed is not loaded: serving it on an empty inventory would admit what
// it exists to refuse.
const inventorySyncTimeout = time.Minute

// replicateInventory gives a gatekeeper policy that declares contextAwareResources its
// inventory, filled before it serves. Other policies are left as they are (stop is a no-op).
func (s *Server) replicateInventory(ctx context.Context, spec *engine.Spec) (stop func(), err error) {
	if spec.ExecutionMode != engine.ModeGatekeeper || len(spec.ContextAwareResources) == 0 {
		return func() {}, nil
	}
	if s.replicator == nil {
		return nil, fmt.Errorf("the policy declares contextAwareResources to replicate into its Gatekeeper inventory, but this policy server has no Kubernetes access")
	}
	inv := engine.NewInventory()
	ctx, cancel := context.WithTimeoutCause(ctx, inventorySyncTimeout, fmt.Errorf("the inventory sync timeout (%s)", inventorySyncTimeout))
	defer cancel()
	if stop, err = s.replicator.Replicate(ctx, spec.ContextAwareResources, inv); err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	spec.Inventory = inv
	return stop, nil
}

// Close unloads the policy and stops replicating its inventory.
func (p *servedPolicy) Close() {
	p.evaluator.Close()
	p.stopInventory()
}
