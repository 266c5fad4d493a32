# A policy that reaches the network: it fetches data.url (its settings) with http.send and
# returns the body as its denial message. Served only to a ClusterAdmissionPolicy that opts in to
# network built-ins; anything else must refuse it at load.
package policy

body := http.send({"method": "GET", "url": data.url}).raw_body

main := {
	"apiVersion": "admission.k8s.io/v1",
	"kind": "AdmissionReview",
	"response": {
		"uid": input.request.uid,
		"allowed": false,
		"status": {"code": 403, "message": body},
	},
}
