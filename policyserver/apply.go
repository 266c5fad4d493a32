package policyserver

import (
	"context"
	"errors"
	"fmt"

	"regent.dev/regent/policyserver/registry"
)

// Apply makes the served policies match cfg: new and changed policies are loaded (beside the
// running revision, which keeps serving until the new one is swapped in), unchanged ones are
// left alone, and policies no longer named are unloaded. A policy that fails to load keeps its
// previous revision serving; the returned error names every such policy and why.
func (s *Server) Apply(ctx context.Context, cfg Config) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	var errs []error
	for name, pc := range cfg {
		if err := s.applyOne(ctx, name, pc); err != nil {
			s.metrics.loadErrors.WithLabelValues(name).Inc()
			s.log.Error(err, "policy not loaded; its previous revision, if any, keeps serving", "policy", name)
			errs = append(errs, fmt.Errorf("policy %s: %w", name, err))
		}
	}
	for name := range s.generations {
		if _, ok := cfg[name]; !ok {
			s.policies.Remove(name, 0)
			delete(s.generations, name)
			s.log.Info("policy unloaded", "policy", name)
		}
	}
	s.metrics.loaded.Set(float64(len(s.policies.Keys())))
	s.ready.Store(true)
	return errors.Join(errs...)
}

func (s *Server) applyOne(ctx context.Context, name string, pc PolicyConfig) error {
	fp, err := pc.fingerprint()
	if err != nil {
		return err
	}
	gen := s.generations[name]
	if gen > 0 {
		if cur, _, release, ok := s.policies.Acquire(name, gen); ok {
			same := cur.fingerprint == fp
			release()
			if same {
				return nil
			}
		}
	}
	p, err := s.load(ctx, name, pc)
	if err != nil {
		return err
	}
	p.fingerprint = fp
	s.policies.Put(registry.Key{Name: name, Generation: gen + 1}, p)
	if gen > 0 {
		s.policies.Remove(name, gen)
	}
	s.generations[name] = gen + 1
	s.log.Info("policy loaded", "policy", name, "generation", gen+1, "executionMode", p.Spec().ExecutionMode, "mode", p.mode)
	return nil
}

func (s *Server) load(ctx context.Context, name string, pc PolicyConfig) (*servedPolicy, error) {
	mode, err := pc.mode()
	if err != nil {
		return nil, err
	}
	if pc.isGroup() {
		g, err := s.loadGroup(ctx, name, pc)
		if err != nil {
			return nil, err
		}
		return &servedPolicy{evaluator: g, name: name, mode: mode, limiter: newPolicyLimiter(s.policyWorkers, cap(s.workers), s.borrowLimit, s.policyQueue, s.policyWait),
			report: reportRef(name, pc, mode), stopInventory: func() {}}, nil
	}
	spec, err := pc.spec(ctx, name)
	if err != nil {
		return nil, err
	}
	stopInventory, err := s.replicateInventory(ctx, &spec)
	if err != nil {
		return nil, err
	}
	p, err := s.engine.Load(ctx, spec)
	if err != nil {
		stopInventory()
		return nil, err
	}
	return &servedPolicy{evaluator: p, name: name, mode: mode, limiter: newPolicyLimiter(s.policyWorkers, cap(s.workers), s.borrowLimit, s.policyQueue, s.policyWait),
		report: reportRef(name, pc, mode), message: pc.Message, stopInventory: stopInventory}, nil
}

// LoadRevision loads a policy under an explicit generation (for callers that manage
// generations themselves, such as PolicyRevision reconcilers); it replaces the same generation
// if loaded.
func (s *Server) LoadRevision(ctx context.Context, key registry.Key, pc PolicyConfig) error {
	p, err := s.load(ctx, key.Name, pc)
	if err != nil {
		s.metrics.loadErrors.WithLabelValues(key.Name).Inc()
		return fmt.Errorf("policy %s generation %d: %w", key.Name, key.Generation, err)
	}
	s.policies.Put(key, p)
	s.metrics.loaded.Set(float64(len(s.policies.Keys())))
	return nil
}

// UnloadRevision unloads one generation of a policy (0: all); requests in flight finish first.
func (s *Server) UnloadRevision(key registry.Key) bool {
	ok := s.policies.Remove(key.Name, key.Generation)
	s.metrics.loaded.Set(float64(len(s.policies.Keys())))
	return ok
}

// Loaded lists the policy revisions being served.
func (s *Server) Loaded() []registry.Key { return s.policies.Keys() }
