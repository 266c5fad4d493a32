package policyserver

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"regent.dev/regent/policyserver/capabilities"
	"regent.dev/regent/policyserver/engine"
)

// metrics live in a registry of the server's own, so that servers in one process (tests) do not
// collide and /metrics shows only this server.
type metrics struct {
	registry    *prometheus.Registry
	evaluations *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	inFlight    prometheus.Gauge
	rejected    *prometheus.CounterVec
	borrowed    *prometheus.CounterVec
	loaded      prometheus.Gauge
	loadErrors  *prometheus.CounterVec
	hostCalls   *prometheus.CounterVec
	logsDropped *prometheus.CounterVec
	kubewarden  kubewardenMetrics
}

func newMetrics() *metrics {
	m := &metrics{
		registry:   prometheus.NewRegistry(),
		kubewarden: newKubewardenMetrics(),
		evaluations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regent_policy_evaluations_total",
			Help: "Policy evaluations by policy, mode (protect, monitor, audit) and outcome (accepted, rejected, mutated, error). In monitor mode the outcome is the policy's real answer, though the request was admitted.",
		}, []string{"policy", "mode", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "regent_policy_evaluation_duration_seconds",
			Help:    "Time to evaluate one admission request with one policy, waiting for an instance included.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"policy"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "regent_policyserver_requests_in_flight",
			Help: "Admission requests being evaluated now.",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regent_policyserver_requests_rejected_total",
			Help: "Requests turned away before evaluation, by reason (overloaded, bad_request, unknown_policy).",
		}, []string{"reason"}),
		borrowed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regent_policyserver_borrowed_evaluations_total",
			Help: "Evaluations run on a worker beyond the policy's share, by policy and outcome (completed; cut: it outran the borrow limit and ran again in the policy's own share).",
		}, []string{"policy", "outcome"}),
		loaded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "regent_policyserver_policies_loaded",
			Help: "Policy revisions loaded and serving.",
		}),
		loadErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regent_policyserver_policy_load_errors_total",
			Help: "Failed attempts to load a policy, by policy.",
		}, []string{"policy"}),
		hostCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regent_policyserver_host_calls_total",
			Help: "Host capability calls from waPC policies, by capability (e.g. kubewarden/kubernetes/get_resource; \"other\" for names Kubewarden does not define) and outcome (ok, not_allowed, not_served, no_kubernetes, timeout, error).",
		}, []string{"capability", "outcome"}),
		logsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regent_policy_guest_log_lines_dropped_total",
			Help: "Guest log lines (waPC __console_log and tracing/log) dropped by a policy's rate limit, by policy.",
		}, []string{"policy"}),
	}
	m.registry.MustRegister(m.evaluations, m.latency, m.inFlight, m.rejected, m.borrowed, m.loaded, m.loadErrors, m.hostCalls, m.logsDropped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.registry.MustRegister(m.kubewarden.collectors()...)
	return m
}

// meteredHost counts the host calls it passes on.
type meteredHost struct {
	next  engine.Host
	calls *prometheus.CounterVec
}

func (h meteredHost) Call(ctx context.Context, c engine.HostCall) ([]byte, error) {
	b, err := h.next.Call(ctx, c)
	h.calls.WithLabelValues(capabilities.Label(c), capabilities.Outcome(err)).Inc()
	return b, err
}
