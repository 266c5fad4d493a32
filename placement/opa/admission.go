package opa

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// AdmissionPath is where the hub serves the Placement admission webhook, on the placement API's
// listener and certificate.
const AdmissionPath = "/mutate/placements"

// DefaultAdmissionPackage is the package a Placement's answer is read from (package
// regent.placement in Rego).
const DefaultAdmissionPackage = "regent.placement"

// DefaultAdmissionBudget is how long one admission may spend retrying: under the 10s timeoutSeconds
// of deploy/hub's webhook configuration, so the answer reaches the apiserver before it gives up.
const DefaultAdmissionBudget = 8 * time.Second

// Event reasons on Placements (or their namespace, for a refused create).
const (
	ReasonDenied         = "PlacementDenied"
	ReasonNonCompliant   = "PlacementNonCompliant"
	ReasonEvalFailed     = "PlacementPolicyFailed"
	ReasonFailedOpen     = "PlacementPolicyFailedOpen"
	ReasonRemediated     = "PlacementRemediated"
	ReasonWouldRemediate = "PlacementWouldRemediate"
)

var (
	admissionResults = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "regent_placement_admission_total",
		Help: "Placement admissions by result: unchanged, patched, denied, failed_closed, failed_open.",
	}, []string{"result"})
	admissionSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "regent_placement_admission_duration_seconds",
		Help:    "Time one Placement admission takes, retries included.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
	})
)

func init() { metrics.Registry.MustRegister(admissionResults, admissionSeconds) }

// Admission asks the placement policy about each created or updated Placement and applies its
// answer. Its ServeHTTP speaks AdmissionReview v1 (controller-runtime's admission.Webhook).
type Admission struct {
	evaluator *evaluator
	// policiesExist reports whether any placement policy ConfigMap exists (loaded or not): from
	// then on a failure to evaluate denies.
	policiesExist func() bool
	recorder      record.EventRecorder
	budget        time.Duration
}

// Handler returns the HTTP handler of the webhook.
func (a *Admission) Handler() http.Handler {
	return &admission.Webhook{Handler: a}
}

// transientError marks a failure that may pass on retry (a namespace not yet in the cache, an
// apiserver hiccup). Evaluation errors are not: the same data gives the same error.
type transientError struct{ err error }

func (e transientError) Error() string { return e.err.Error() }
func (e transientError) Unwrap() error { return e.err }

// Handle implements admission.Handler.
func (a *Admission) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	resp, result := a.handle(ctx, req)
	admissionSeconds.Observe(time.Since(start).Seconds())
	admissionResults.WithLabelValues(result).Inc()
	return resp
}

func (a *Admission) handle(ctx context.Context, req admission.Request) (admission.Response, string) {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed(""), "unchanged"
	}
	var obj map[string]any
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode Placement: %w", err)), "failed_closed"
	}
	placement := &unstructured.Unstructured{Object: obj}
	if placement.GetNamespace() == "" {
		placement.SetNamespace(req.Namespace)
	}
	// Events name the Placement; a refused create has no Placement to name, so its namespace.
	subject := func() *unstructured.Unstructured {
		if req.Operation == admissionv1.Create {
			ns := &unstructured.Unstructured{}
			ns.SetAPIVersion("v1")
			ns.SetKind("Namespace")
			ns.SetName(req.Namespace)
			// So the Event lands in the namespace itself, beside its Placements' Events.
			ns.SetNamespace(req.Namespace)
			return ns
		}
		return placement
	}
	name := req.Namespace + "/" + placement.GetName()
	// The webhook is registered with sideEffects NoneOnDryRun: a dry-run request leaves no Event.
	event := func(obj *unstructured.Unstructured, typ, reason, msg string) {
		if req.DryRun == nil || !*req.DryRun {
			a.recorder.Event(obj, typ, reason, msg)
		}
	}

	ctx, cancel := context.WithTimeout(ctx, a.budget)
	defer cancel()
	var ans Answer
	// Stays the error if the deadline passes before the first evaluation.
	evalErr := errors.New("no evaluation before the admission deadline")
	_ = wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 20 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 12, Cap: 2 * time.Second},
		func(ctx context.Context) (bool, error) {
			ans, evalErr = a.evaluator.evaluate(ctx, string(req.Operation), obj)
			var te transientError
			return evalErr == nil || !errors.As(evalErr, &te), nil
		})
	if evalErr != nil {
		if a.policiesExist() {
			msg := fmt.Sprintf("placement policy could not be evaluated, and placement policies exist, so Regent fails closed: %v", evalErr)
			event(subject(), corev1.EventTypeWarning, ReasonEvalFailed, msg)
			return admission.Denied(msg), "failed_closed"
		}
		msg := fmt.Sprintf("placement policy could not be evaluated; no placement policy exists, so Regent admits it unchanged: %v", evalErr)
		event(subject(), corev1.EventTypeWarning, ReasonFailedOpen, msg)
		return admission.Allowed("").WithWarnings(msg), "failed_open"
	}

	var warnings []string
	if len(ans.Errors) > 0 {
		msg := "placement policy denies " + name + ": " + strings.Join(ans.Errors, "; ")
		if req.Operation == admissionv1.Create {
			event(subject(), corev1.EventTypeWarning, ReasonDenied, msg)
			return admission.Denied(msg), "denied"
		}
		changed, err := authorIntentChanged(req.OldObject.Raw, obj)
		if err != nil || changed {
			event(subject(), corev1.EventTypeWarning, ReasonDenied, msg)
			return admission.Denied(msg), "denied"
		}
		// The author did not change what they ask for (a label edit, Regent's own remediation):
		// refusing would not make the Placement compliant and would block narrowing it, so the
		// answer is applied and the violation reported.
		event(placement, corev1.EventTypeWarning, ReasonNonCompliant, msg)
		warnings = append(warnings, msg)
	}
	merged, changed, err := mergeAnswer(obj, ans)
	if err != nil {
		msg := fmt.Sprintf("apply the placement policy's answer to %s: %v", name, err)
		event(subject(), corev1.EventTypeWarning, ReasonEvalFailed, msg)
		return admission.Denied(msg), "failed_closed"
	}
	if !changed {
		return admission.Allowed("").WithWarnings(warnings...), "unchanged"
	}
	raw, err := json.Marshal(merged)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err), "failed_closed"
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw).WithWarnings(warnings...), "patched"
}

// authorIntentChanged reports whether an update changes what the author asks of the Placement:
// its spec with Regent's addition taken out.
func authorIntentChanged(oldRaw []byte, newObj map[string]any) (bool, error) {
	var old map[string]any
	if err := json.Unmarshal(oldRaw, &old); err != nil {
		return true, err
	}
	ov, err := authorView(old)
	if err != nil {
		return true, err
	}
	nv, err := authorView(newObj)
	if err != nil {
		return true, err
	}
	return !reflect.DeepEqual(ov["spec"], nv["spec"]), nil
}

// evaluator builds a Placement's input and queries the admission package.
type evaluator struct {
	engine *Engine
	pkg    []string
	// namespaceLabels returns a namespace's labels; a transientError when it may appear later.
	namespaceLabels func(ctx context.Context, name string) (map[string]string, error)
}

// PackagePath splits a package name (regent.placement, or regent/placement) into the data path.
func PackagePath(pkg string) []string {
	return strings.FieldsFunc(pkg, func(r rune) bool { return r == '.' || r == '/' })
}

// evaluate queries the package with input {operation, placement (as its author wrote it),
// namespace {name, labels}} and decodes the answer.
func (e *evaluator) evaluate(ctx context.Context, operation string, obj map[string]any) (Answer, error) {
	view, err := authorView(obj)
	if err != nil {
		return Answer{}, fmt.Errorf("read the Placement: %w", err)
	}
	ns := (&unstructured.Unstructured{Object: obj}).GetNamespace()
	labels, err := e.namespaceLabels(ctx, ns)
	if err != nil {
		return Answer{}, fmt.Errorf("namespace %s: %w", ns, err)
	}
	nsLabels := make(map[string]any, len(labels))
	for k, v := range labels {
		nsLabels[k] = v
	}
	input := map[string]any{
		"operation": operation,
		"placement": view,
		"namespace": map[string]any{"name": ns, "labels": nsLabels},
	}
	doc, defined, err := e.engine.Query(ctx, e.pkg, input)
	if err != nil {
		return Answer{}, fmt.Errorf("evaluate data.%s: %w", strings.Join(e.pkg, "."), err)
	}
	ans, err := decodeAnswer(doc, defined)
	if err != nil {
		return Answer{}, fmt.Errorf("data.%s: %w", strings.Join(e.pkg, "."), err)
	}
	klog.FromContext(ctx).V(4).Info("placement answer", "placement", ns+"/"+(&unstructured.Unstructured{Object: obj}).GetName(), "errors", len(ans.Errors), "required", len(ans.Required))
	return ans, nil
}
