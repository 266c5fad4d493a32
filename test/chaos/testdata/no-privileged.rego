# Kubewarden's OPA contract (policy/main evaluates to an AdmissionReview): no privileged containers.
package policy

default uid := ""

uid := input.request.uid

deny contains msg if {
	some c in input.request.object.spec.containers
	c.securityContext.privileged == true
	msg := sprintf("container %s is privileged", [c.name])
}

default response := {"allowed": true}

response := {"uid": uid, "allowed": false, "status": {"code": 403, "message": concat("; ", sort(deny))}} if count(deny) > 0

main := {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
