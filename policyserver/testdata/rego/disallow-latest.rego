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
	untagged(c.image)
	msg := sprintf("container %s has no tag, which means :latest", [c.name])
}

# An image is untagged when the last path segment names neither a tag nor a digest (a registry
# port, as in registry:5000/nginx, sits in an earlier segment).
untagged(image) if {
	segments := split(image, "/")
	last := segments[count(segments) - 1]
	not contains(last, ":")
	not contains(last, "@")
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
