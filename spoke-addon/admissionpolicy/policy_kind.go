package admissionpolicy

import (
	"encoding/json"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// policyKind hides the difference between ClusterAdmissionPolicy and AdmissionPolicy: one
// reconciler serves both through it.
type policyKind struct {
	kind string
	new  func() client.Object
}

var (
	clusterPolicyKind = policyKind{kind: kubewardenv1.KindClusterAdmissionPolicy,
		new: func() client.Object { return &kubewardenv1.ClusterAdmissionPolicy{} }}
	namespacedPolicyKind = policyKind{kind: kubewardenv1.KindAdmissionPolicy,
		new: func() client.Object { return &kubewardenv1.AdmissionPolicy{} }}
)

// specOf returns the policy's spec, which the caller may change.
func specOf(obj client.Object) *kubewardenv1.PolicySpec {
	switch p := obj.(type) {
	case *kubewardenv1.ClusterAdmissionPolicy:
		return &p.Spec.PolicySpec
	case *kubewardenv1.AdmissionPolicy:
		return &p.Spec
	}
	panic(fmt.Sprintf("admissionpolicy: %T is not a policy", obj))
}

func statusOf(obj client.Object) *kubewardenv1.PolicyStatus {
	switch p := obj.(type) {
	case *kubewardenv1.ClusterAdmissionPolicy:
		return &p.Status
	case *kubewardenv1.AdmissionPolicy:
		return &p.Status
	}
	panic(fmt.Sprintf("admissionpolicy: %T is not a policy", obj))
}

// referenceTo is the PolicyReference a revision of obj carries.
func referenceTo(k policyKind, obj client.Object) kubewardenv1.PolicyReference {
	return kubewardenv1.PolicyReference{
		APIVersion: kubewardenv1.GroupVersion.String(), Kind: k.kind,
		Name: obj.GetName(), Namespace: obj.GetNamespace(), UID: string(obj.GetUID()),
	}
}

// policyServerOf is the PolicyServer serving the policy; "default" as the CRD defaults it.
func policyServerOf(obj client.Object) string {
	if ps := specOf(obj).PolicyServer; ps != "" {
		return ps
	}
	return "default"
}

// revisionState reads what the decision needs from a revision; its data's mode is the mode the
// policy has while that generation serves.
func stateOf(rev *kubewardenv1.PolicyRevision) revisionState {
	var data struct {
		Mode kubewardenv1.PolicyMode `json:"mode"`
	}
	_ = json.Unmarshal(rev.Spec.Data.Raw, &data) // a revision without a readable mode is protect
	if data.Mode == "" {
		data.Mode = kubewardenv1.ModeProtect
	}
	return revisionState{
		Name: rev.Name, Generation: rev.Spec.PolicyGeneration, Enabled: rev.Spec.Enabled,
		Mode: data.Mode, Conditions: rev.Status.Conditions, Replicas: rev.Status.Replicas,
	}
}
