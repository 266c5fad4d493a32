# Kubewarden-style OPA policy for any object: denies one without a team label.
package policy

default uid := ""

uid := input.request.uid

deny contains msg if {
	not input.request.object.metadata.labels.team
	msg := sprintf("%s %s has no team label", [input.request.kind.kind, input.request.object.metadata.name])
}

default response := {"allowed": true}

response := {
	"uid": uid,
	"allowed": false,
	"status": {"code": 403, "message": concat("; ", sort(deny))},
} if count(deny) > 0

main := {
	"apiVersion": "admission.k8s.io/v1",
	"kind": "AdmissionReview",
	"response": response,
}
