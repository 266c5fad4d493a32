# A policy whose sprintf format asks for 300 numbers padded to a million characters each: a few
# kilobytes of Rego that would make the host, which serves sprintf, build 300 MB.
package policy

format := concat("", [f | some _ in numbers.range(1, 300); f := "%999999d"])

main := {
	"apiVersion": "admission.k8s.io/v1",
	"kind": "AdmissionReview",
	"response": {
		"uid": input.request.uid,
		"allowed": false,
		"status": {"code": 403, "message": sprintf(format, numbers.range(1, 300))},
	},
}
