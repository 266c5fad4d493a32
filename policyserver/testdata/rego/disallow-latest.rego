# Kubewarden-style OPA policy: the entrypoint policy/main evaluates to an AdmissionReview.
# Denies containers whose image uses the :latest tag or no tag at all (which means :latest).
package policy

default uid := ""

uid := input.request.uid

containers contains c if some c in input.request.object.spec.containers

containers contains c if some c in input.request.object.spec.initContainers

deny contains msg if {
	some c in containers
	endswith(c.image, ":latest")
	msg := sprintf("container %s uses the :latest tag", [c.name])
}

deny contains msg if {
	some c in containers
	not regex.match(`:[^/]+$|@sha256:`, c.image)
	msg := sprintf("container %s has no tag, which means :latest", [c.name])
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
