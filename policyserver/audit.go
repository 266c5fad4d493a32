package policyserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
)

// Errors Audit returns instead of an answer; the caller retries later.
var (
	ErrNotLoaded = errors.New("policy generation not loaded")
	ErrBusy      = errors.New("policy server busy")
)

// Audit evaluates request (an AdmissionRequest as JSON) with one loaded generation of a policy,
// in process, exactly as POST /audit/<policy>/<generation> does: the same per-policy share and
// worker slots (so an audit never takes more than admission leaves it), the same decision, no
// mutation applied, and the evaluation counted with mode "audit". outcome is accepted, rejected or
// error. The background scan calls it, so existing objects are judged as requests are.
func (s *Server) Audit(ctx context.Context, policy string, generation int64, request []byte) (resp *admissionv1.AdmissionResponse, outcome string, err error) {
	p, key, release, ok := s.policies.Acquire(policy, generation)
	if !ok {
		return nil, "", fmt.Errorf("%w: %s generation %d", ErrNotLoaded, policy, generation)
	}
	defer release()
	// The background scan never borrows: it takes what admission leaves.
	sl, reason, ok := s.takeSlot(ctx, p, false)
	if !ok {
		if reason == reasonSaturated {
			return nil, "", fmt.Errorf("%w: policy %s saturated", ErrBusy, policy)
		}
		return nil, "", fmt.Errorf("%w: too many requests waiting", ErrBusy)
	}
	defer sl.release()
	uid, err := requestUID(request)
	if err != nil {
		return nil, "", err
	}
	s.metrics.inFlight.Inc()
	defer s.metrics.inFlight.Dec()
	start := time.Now()
	answer, verr := p.Validate(ctx, request)
	took := time.Since(start)
	s.metrics.latency.WithLabelValues(p.name).Observe(took.Seconds())
	resp, outcome = s.decide(p, key, true, answer, verr, uid, request)
	s.metrics.kubewarden.observe(p, true, request, resp, verr == nil && answer.MutatedObject != nil, took)
	s.metrics.evaluations.WithLabelValues(p.name, "audit", outcome).Inc()
	return resp, outcome, nil
}

// Registerer is the registry behind /metrics, for components that run beside the server (the
// background scan) to publish theirs in the same place.
func (s *Server) Registerer() prometheus.Registerer { return s.metrics.registry }
