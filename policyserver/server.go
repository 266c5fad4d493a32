package policyserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"regent.dev/regent/policyserver/engine"
	"regent.dev/regent/policyserver/registry"
	"regent.dev/regent/reports"
)

// maxReviewBytes bounds a request body: kube-apiserver objects are at most ~3 MiB, and a review
// can carry the object twice (object, oldObject).
const maxReviewBytes = 8 << 20

// servedPolicy is a loaded policy with what the server, not the engine, decides about it.
type servedPolicy struct {
	evaluator
	name        string
	mode        PolicyMode
	fingerprint string
	limiter     *policyLimiter
	// report is the policy its admission answers are reported under (nil: not reported).
	report *reports.PolicyRef
	// message replaces rejection messages (PolicyConfig.Message).
	message string
	// stopInventory stops replicating the policy's Gatekeeper inventory (a no-op for others).
	stopInventory func()
}

// Server answers admission requests for the policies in its registry.
type Server struct {
	engine *engine.Engine
	// replicator fills Gatekeeper policies' inventories; nil without Kubernetes access.
	replicator InventoryReplicator
	policies   *registry.Registry[*servedPolicy]
	metrics    *metrics
	log        logr.Logger
	mux        *http.ServeMux

	// workers bounds evaluations running at once (≈ cores: more only adds contention);
	// waiting bounds the queue behind them, beyond which requests are turned away (429).
	workers  chan struct{}
	waiting  atomic.Int64
	maxQueue int64
	// policyWorkers, policyQueue and policyWait size each loaded policy's share (see
	// policyLimiter).
	policyWorkers, policyQueue int
	policyWait                 time.Duration
	// borrowLimit bounds an evaluation on a worker beyond its policy's share (see policyLimiter).
	borrowLimit time.Duration

	ready atomic.Bool

	applyMu     sync.Mutex
	generations map[string]int64

	reports *admissionReports
}

// Engine returns the server's evaluation engine.
func (s *Server) Engine() *engine.Engine { return s.engine }

// Handler serves /validate, /audit, /readyz and /livez: what kube-apiserver and the kubelet
// call on the admission port.
func (s *Server) Handler() http.Handler { return s.mux }

// MetricsHandler serves /metrics, on a listener of its own (see ServeMetrics): the admission
// port is open to any source, since the apiserver's address cannot be known in general.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{}))
	return mux
}

// concurrency sizes the server's workers and queue and each policy's share of them.
type concurrency struct {
	workers, maxQueue, policyWorkers, policyQueue int
	policyWait, borrowLimit                       time.Duration
}

func newServer(e *engine.Engine, m *metrics, c concurrency, log logr.Logger) *Server {
	s := &Server{
		engine:        e,
		policies:      registry.New[*servedPolicy](),
		metrics:       m,
		log:           log,
		workers:       make(chan struct{}, c.workers),
		maxQueue:      int64(c.maxQueue),
		policyWorkers: c.policyWorkers,
		policyQueue:   c.policyQueue,
		policyWait:    c.policyWait,
		borrowLimit:   c.borrowLimit,
		generations:   map[string]int64{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /validate/{policy}", s.serveAdmission(false))
	mux.HandleFunc("POST /validate/{policy}/{generation}", s.serveAdmission(false))
	mux.HandleFunc("POST /audit/{policy}", s.serveAdmission(true))
	mux.HandleFunc("POST /audit/{policy}/{generation}", s.serveAdmission(true))
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", s.serveReady)
	s.mux = mux
	return s
}

func (s *Server) serveReady(w http.ResponseWriter, _ *http.Request) {
	if !s.ready.Load() {
		http.Error(w, "policies not loaded yet", http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "ok\n")
	for _, k := range s.policies.Keys() {
		fmt.Fprintf(w, "%s/%d\n", k.Name, k.Generation)
	}
}

func (s *Server) serveAdmission(audit bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("policy")
		var generation int64
		if g := r.PathValue("generation"); g != "" {
			var err error
			if generation, err = strconv.ParseInt(g, 10, 64); err != nil || generation <= 0 {
				s.metrics.rejected.WithLabelValues("bad_request").Inc()
				http.Error(w, fmt.Sprintf("generation %q is not a positive integer", g), http.StatusBadRequest)
				return
			}
		}
		p, key, release, ok := s.policies.Acquire(name, generation)
		if !ok {
			s.metrics.rejected.WithLabelValues("unknown_policy").Inc()
			what := "policy " + strconv.Quote(name)
			if generation != 0 {
				what += " generation " + strconv.FormatInt(generation, 10)
			}
			http.Error(w, what+" is not loaded", http.StatusNotFound)
			return
		}
		defer release()
		sl, reason, ok := s.takeSlot(r.Context(), p, true)
		if !ok {
			s.turnAway(w, p, key, reason)
			return
		}
		// Released as soon as the evaluation ends, not after the answer is written to a
		// possibly slow connection; the deferred call covers the early returns.
		defer func() { sl.release() }()
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReviewBytes))
		if err != nil {
			s.metrics.rejected.WithLabelValues("bad_request").Inc()
			http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
			return
		}
		rev, meta, err := decodeReview(body)
		if err != nil {
			s.metrics.rejected.WithLabelValues("bad_request").Inc()
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp, refused := s.evaluate(r.Context(), p, key, audit, rev.Request, meta, &sl)
		sl.release()
		if refused != nil {
			s.turnAway(w, p, key, refused.reason)
			return
		}
		out, err := encodeReview(rev.APIVersion, resp)
		if err != nil {
			http.Error(w, "encode response: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	}
}

// turnAway answers 429 for a request that found no place to be evaluated; the apiserver then
// applies the webhook's failurePolicy.
func (s *Server) turnAway(w http.ResponseWriter, p *servedPolicy, key registry.Key, reason string) {
	s.metrics.rejected.WithLabelValues(reason).Inc()
	w.Header().Set("Retry-After", "1")
	msg := "policy server overloaded: too many requests waiting"
	if reason == reasonSaturated {
		msg = fmt.Sprintf("policy %s is saturated: its evaluations running or waiting reached its share of the server (%d requests, or %s of expected wait)", key.Name, p.limiter.max, p.limiter.wait)
	}
	http.Error(w, msg, http.StatusTooManyRequests)
}

// enterWorker takes a worker slot, waiting in a bounded queue; false means the queue is full or
// the caller gave up.
func (s *Server) enterWorker(ctx context.Context) bool {
	select {
	case s.workers <- struct{}{}:
		return true
	default:
	}
	if s.waiting.Add(1) > s.maxQueue {
		s.waiting.Add(-1)
		return false
	}
	defer s.waiting.Add(-1)
	select {
	case s.workers <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// evaluate runs the policy and turns its answer into an AdmissionResponse: errors deny (fail
// closed) with what failed; a mutation becomes a JSONPatch when the policy may mutate and a
// denial when it may not; monitor mode admits whatever the answer (audit reports it as is).
//
// refused is set, and nothing else, when a borrowed evaluation was cut and found no place to run
// again: the caller turns the request away as if it had found none at first.
func (s *Server) evaluate(ctx context.Context, p *servedPolicy, key registry.Key, audit bool, request []byte, meta requestMeta, sl *slot) (_ *admissionv1.AdmissionResponse, refused *slotRefused) {
	s.metrics.inFlight.Inc()
	defer s.metrics.inFlight.Dec()
	start := time.Now()
	answer, err := s.validate(ctx, p, request, sl)
	if errors.As(err, &refused) {
		return nil, refused
	}
	took := time.Since(start)
	s.metrics.latency.WithLabelValues(p.name).Observe(took.Seconds())

	mode := string(p.mode)
	if audit {
		mode = "audit"
	}
	resp, outcome := s.decide(p, key, audit, answer, err, meta.UID, request)
	s.metrics.kubewarden.observe(p, audit, request, resp, err == nil && answer.MutatedObject != nil, took)
	withCustomMessage(resp, p.message)
	s.reportAnswer(p, key, audit, request, outcome, messageOf(resp))
	s.metrics.evaluations.WithLabelValues(p.name, mode, outcome).Inc()
	if err != nil {
		s.log.Error(err, "policy evaluation failed", "policy", key.Name, "generation", key.Generation, "uid", meta.UID)
	}
	if p.mode == ModeMonitor && !audit {
		if outcome != "accepted" {
			s.log.Info("monitor mode: request would have been rejected", "policy", key.Name, "uid", meta.UID, "outcome", outcome, "message", messageOf(resp))
		}
		return &admissionv1.AdmissionResponse{UID: meta.UID, Allowed: true}, nil
	}
	return resp, nil
}

func (s *Server) decide(p *servedPolicy, key registry.Key, audit bool, answer engine.Response, err error, uid types.UID, request []byte) (*admissionv1.AdmissionResponse, string) {
	if err != nil {
		code := int32(http.StatusInternalServerError)
		if errors.Is(err, engine.ErrTimeout) {
			code = http.StatusGatewayTimeout
		}
		return deny(uid, code, fmt.Sprintf("policy %s (generation %d) failed, so the request is denied: %v", key.Name, key.Generation, err)), "error"
	}
	if !answer.Accepted {
		code := answer.Code
		if code == 0 {
			code = http.StatusBadRequest
		}
		resp := deny(uid, code, answer.Message)
		for _, c := range answer.Causes {
			if resp.Result.Details == nil {
				resp.Result.Details = &metav1.StatusDetails{}
			}
			resp.Result.Details.Causes = append(resp.Result.Details.Causes, metav1.StatusCause{Field: c.Field, Message: c.Message})
		}
		resp.Warnings = answer.Warnings
		resp.AuditAnnotations = answer.AuditAnnotations
		return resp, "rejected"
	}
	resp := &admissionv1.AdmissionResponse{UID: uid, Allowed: true, Warnings: answer.Warnings, AuditAnnotations: answer.AuditAnnotations}
	if answer.MutatedObject == nil || audit {
		return resp, "accepted"
	}
	if !p.Spec().Mutating {
		return deny(uid, http.StatusInternalServerError, fmt.Sprintf("policy %s is not allowed to mutate the request, but it answered with a mutated object", key.Name)), "error"
	}
	object, err := requestObject(request)
	var patch []byte
	if err == nil {
		patch, err = engine.Patch(object, answer.MutatedObject)
	}
	if err != nil {
		return deny(uid, http.StatusInternalServerError, fmt.Sprintf("policy %s: %v", key.Name, err)), "error"
	}
	if patch == nil {
		return resp, "accepted"
	}
	pt := admissionv1.PatchTypeJSONPatch
	resp.Patch, resp.PatchType = patch, &pt
	return resp, "mutated"
}

// withCustomMessage puts the policy's own message for a rejection, whatever its cause, as a cause
// in the status details and answers with the custom message instead, as Kubewarden does.
func withCustomMessage(r *admissionv1.AdmissionResponse, message string) {
	if r.Allowed || message == "" {
		return
	}
	if r.Result == nil {
		r.Result = &metav1.Status{Status: metav1.StatusFailure}
	}
	if r.Result.Details == nil {
		r.Result.Details = &metav1.StatusDetails{}
	}
	r.Result.Details.Causes = append(r.Result.Details.Causes, metav1.StatusCause{Message: r.Result.Message})
	r.Result.Message = message
}

func messageOf(r *admissionv1.AdmissionResponse) string {
	if r.Result == nil {
		return ""
	}
	return r.Result.Message
}
