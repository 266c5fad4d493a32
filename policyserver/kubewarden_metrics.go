package policyserver

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
)

// Kubewarden's policy server exports these two through OpenTelemetry; a collector's Prometheus
// exporter turns them into the names and labels below, which Kubewarden's Grafana dashboard
// queries. Serving them under the same names and labels keeps that dashboard working unchanged.
// A label Kubewarden leaves out of an evaluation (resource_namespace of a cluster-scoped object,
// error_code of an answer without one) is empty here, which Prometheus treats as absent.
var kubewardenLabels = []string{"policy_name", "policy_mode", "resource_kind", "resource_namespace",
	"resource_request_operation", "accepted", "mutated", "request_origin", "error_code"}

// kubewardenLatencyBuckets are OpenTelemetry's default explicit histogram bounds, in
// milliseconds, which is what Kubewarden's histogram carries.
var kubewardenLatencyBuckets = []float64{0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000}

type kubewardenMetrics struct {
	evaluations *prometheus.CounterVec
	latency     *prometheus.HistogramVec
}

func newKubewardenMetrics() kubewardenMetrics {
	return kubewardenMetrics{
		evaluations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubewarden_policy_evaluations_total",
			Help: "Policy evaluations with Kubewarden's labels: accepted is the policy's own answer (in monitor mode too), request_origin validate or audit.",
		}, kubewardenLabels),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kubewarden_policy_evaluation_latency_milliseconds",
			Help:    "Time to evaluate one request with one policy, in milliseconds, with Kubewarden's labels.",
			Buckets: kubewardenLatencyBuckets,
		}, kubewardenLabels),
	}
}

func (k kubewardenMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{k.evaluations, k.latency}
}

// observe records one evaluation. resp is the policy's answer before monitor mode admits it.
func (k kubewardenMetrics) observe(p *servedPolicy, audit bool, request []byte, resp *admissionv1.AdmissionResponse, mutated bool, took time.Duration) {
	origin := "validate"
	if audit {
		origin = "audit"
	}
	errorCode := ""
	if resp.Result != nil && resp.Result.Code != 0 {
		errorCode = strconv.Itoa(int(resp.Result.Code))
	}
	kind, namespace, operation := requestLabels(request)
	values := []string{p.name, string(p.mode), kind, namespace, operation,
		strconv.FormatBool(resp.Allowed), strconv.FormatBool(mutated), origin, errorCode}
	k.evaluations.WithLabelValues(values...).Inc()
	k.latency.WithLabelValues(values...).Observe(float64(took) / float64(time.Millisecond))
}
