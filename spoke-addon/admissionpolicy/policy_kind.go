package admissionpolicy

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// policyKind hides the differences between ClusterAdmissionPolicy, AdmissionPolicy and their
// group kinds: one reconciler serves them all through it.
type policyKind struct {
	kind    string
	new     func() client.Object
	newList func() client.ObjectList
}

var (
	clusterPolicyKind = policyKind{kind: kubewardenv1.KindClusterAdmissionPolicy,
		new:     func() client.Object { return &kubewardenv1.ClusterAdmissionPolicy{} },
		newList: func() client.ObjectList { return &kubewardenv1.ClusterAdmissionPolicyList{} }}
	namespacedPolicyKind = policyKind{kind: kubewardenv1.KindAdmissionPolicy,
		new:     func() client.Object { return &kubewardenv1.AdmissionPolicy{} },
		newList: func() client.ObjectList { return &kubewardenv1.AdmissionPolicyList{} }}
	clusterGroupKind = policyKind{kind: kubewardenv1.KindClusterAdmissionPolicyGroup,
		new:     func() client.Object { return &kubewardenv1.ClusterAdmissionPolicyGroup{} },
		newList: func() client.ObjectList { return &kubewardenv1.ClusterAdmissionPolicyGroupList{} }}
	namespacedGroupKind = policyKind{kind: kubewardenv1.KindAdmissionPolicyGroup,
		new:     func() client.Object { return &kubewardenv1.AdmissionPolicyGroup{} },
		newList: func() client.ObjectList { return &kubewardenv1.AdmissionPolicyGroupList{} }}
)

// namespacedKind tells the kinds whose webhooks only see their own namespace.
func namespacedKind(kind string) bool {
	return kind == kubewardenv1.KindAdmissionPolicy || kind == kubewardenv1.KindAdmissionPolicyGroup
}

// listOf lists the objects of kind k that reader's list options select.
func listOf(k policyKind) (client.ObjectList, func() []client.Object) {
	list := k.newList()
	return list, func() []client.Object {
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil
		}
		out := make([]client.Object, 0, len(items))
		for _, it := range items {
			if o, ok := it.(client.Object); ok {
				out = append(out, o)
			}
		}
		return out
	}
}

// specOf returns the policy's spec, which the caller may change. A group's is the part of its
// spec a policy's shares (rules, selectors, mode, timeouts, …), a copy: what the webhook is built
// from.
func specOf(obj client.Object) *kubewardenv1.PolicySpec {
	switch p := obj.(type) {
	case *kubewardenv1.ClusterAdmissionPolicy:
		return &p.Spec.PolicySpec
	case *kubewardenv1.AdmissionPolicy:
		return &p.Spec
	case *kubewardenv1.ClusterAdmissionPolicyGroup:
		return groupAsPolicySpec(&p.Spec)
	case *kubewardenv1.AdmissionPolicyGroup:
		return groupAsPolicySpec(&p.Spec)
	}
	panic(fmt.Sprintf("admissionpolicy: %T is not a policy", obj))
}

// groupAsPolicySpec reads a group's spec as a policy's: the shared fields have the same JSON names.
func groupAsPolicySpec(g *kubewardenv1.PolicyGroupSpec) *kubewardenv1.PolicySpec {
	b, err := json.Marshal(g)
	if err != nil {
		panic(fmt.Sprintf("admissionpolicy: encode group spec: %v", err))
	}
	spec := &kubewardenv1.PolicySpec{}
	if err := json.Unmarshal(b, spec); err != nil {
		panic(fmt.Sprintf("admissionpolicy: group spec as a policy spec: %v", err))
	}
	return spec
}

// revisionData is what a revision of obj holds: the whole spec, a group's included.
func revisionData(obj client.Object) ([]byte, error) {
	switch p := obj.(type) {
	case *kubewardenv1.ClusterAdmissionPolicyGroup:
		return json.Marshal(&p.Spec)
	case *kubewardenv1.AdmissionPolicyGroup:
		return json.Marshal(&p.Spec)
	}
	return json.Marshal(specOf(obj))
}

// restoreSpec sets obj's spec to the one a revision holds (a rollback).
func restoreSpec(obj client.Object, data []byte) error {
	switch p := obj.(type) {
	case *kubewardenv1.ClusterAdmissionPolicyGroup:
		p.Spec = kubewardenv1.PolicyGroupSpec{}
		return json.Unmarshal(data, &p.Spec)
	case *kubewardenv1.AdmissionPolicyGroup:
		p.Spec = kubewardenv1.PolicyGroupSpec{}
		return json.Unmarshal(data, &p.Spec)
	}
	restored := kubewardenv1.PolicySpec{}
	if err := json.Unmarshal(data, &restored); err != nil {
		return err
	}
	*specOf(obj) = restored
	return nil
}

func statusOf(obj client.Object) *kubewardenv1.PolicyStatus {
	switch p := obj.(type) {
	case *kubewardenv1.ClusterAdmissionPolicy:
		return &p.Status
	case *kubewardenv1.AdmissionPolicy:
		return &p.Status
	case *kubewardenv1.ClusterAdmissionPolicyGroup:
		return &p.Status
	case *kubewardenv1.AdmissionPolicyGroup:
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
