# An OPA (Kubewarden-style) policy configured by its settings, which OPA policies read as data:
# every label data.required names must be on the object. The settings fuzz target compares its
# answers with what the settings say.
package settings

required contains l if some l in data.required

missing contains l if {
	some l in required
	not input.request.object.metadata.labels[l]
}

main := {
	"apiVersion": "admission.k8s.io/v1",
	"kind": "AdmissionReview",
	"response": {
		"uid": input.request.uid,
		"allowed": count(missing) == 0,
		"status": {"message": sprintf("missing labels: %v", [missing])},
	},
}
