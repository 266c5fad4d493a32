package v1

// Kubewarden's annotations that classify a policy's results. Its audit scanner copies them into
// every PolicyReport result of the policy (severity, category); Regent's report producers do the
// same (package reports, Classify), and kubectl shows them as the Severity and Category columns.
const (
	AnnotationSeverity = "io.kubewarden.policy.severity"
	AnnotationCategory = "io.kubewarden.policy.category"
)
