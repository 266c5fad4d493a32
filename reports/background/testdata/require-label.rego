# Kubewarden-style OPA policy for the background scan's tests: the object must carry the label
# named by the setting "label" (data.label).
package policy

default uid := ""

uid := input.request.uid

labels := object.get(input.request.object.metadata, "labels", {})

default response := {"allowed": true}

response := {
	"uid": uid,
	"allowed": false,
	"status": {"code": 403, "message": sprintf("%s %s has no label %s", [input.request.kind.kind, input.request.name, data.label])},
} if not labels[data.label]

main := {
	"apiVersion": "admission.k8s.io/v1",
	"kind": "AdmissionReview",
	"response": response,
}
