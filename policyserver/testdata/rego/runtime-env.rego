# A policy that reads the policy server's environment through opa.runtime and returns it as its
# denial message. No policy may have it.
package policy

main := {
	"apiVersion": "admission.k8s.io/v1",
	"kind": "AdmissionReview",
	"response": {
		"uid": input.request.uid,
		"allowed": false,
		"status": {"code": 403, "message": sprintf("%v", [opa.runtime().env])},
	},
}
