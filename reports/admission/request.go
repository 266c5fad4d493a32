package admission

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"regent.dev/regent/reports"
)

// request is the part of an AdmissionRequest a report needs.
type request struct {
	UID         types.UID               `json:"uid"`
	Kind        metav1.GroupVersionKind `json:"kind"`
	SubResource string                  `json:"subResource"`
	Namespace   string                  `json:"namespace"`
	Operation   string                  `json:"operation"`
	DryRun      *bool                   `json:"dryRun"`
	Object      struct {
		Metadata struct {
			Name string    `json:"name"`
			UID  types.UID `json:"uid"`
		} `json:"metadata"`
	} `json:"object"`
}

// Reasons an answer gets no report, the values of the skipped counter's reason label.
const (
	skipUndecodable = "undecodable"
	skipDelete      = "delete"
	skipOperation   = "operation"
	skipSubresource = "subresource"
	skipDryRun      = "dry_run"
	skipNoUID       = "no_uid"
	skipDuplicate   = "duplicate"
)

// resourceOf says which resource an admission request's answer is about, or why it has none
// to report on. Only CREATE and UPDATE of a whole object qualify: a DELETE must not recreate the
// report of an object on its way out, a CONNECT has no object, a subresource's object may be of
// another kind (pods/eviction is an Eviction), and a dry run stores nothing. A CREATE reaches a
// validating webhook with metadata.uid already set by kube-apiserver; a mutating webhook sees no
// UID yet, so its answers are skipped as no_uid.
func resourceOf(raw []byte) (types.UID, reports.Resource, string, error) {
	var r request
	if err := json.Unmarshal(raw, &r); err != nil {
		return "", reports.Resource{}, skipUndecodable, fmt.Errorf("decode AdmissionRequest: %w", err)
	}
	switch {
	case r.Operation == "DELETE":
		return r.UID, reports.Resource{}, skipDelete, nil
	case r.Operation != "CREATE" && r.Operation != "UPDATE":
		return r.UID, reports.Resource{}, skipOperation, nil
	case r.SubResource != "":
		return r.UID, reports.Resource{}, skipSubresource, nil
	case r.DryRun != nil && *r.DryRun:
		return r.UID, reports.Resource{}, skipDryRun, nil
	case r.Object.Metadata.UID == "" || r.Object.Metadata.Name == "" || r.Kind.Kind == "":
		return r.UID, reports.Resource{}, skipNoUID, nil
	}
	gv := metav1.GroupVersion{Group: r.Kind.Group, Version: r.Kind.Version}
	return r.UID, reports.Resource{
		APIVersion: gv.String(), Kind: r.Kind.Kind,
		// The request's namespace is empty exactly for cluster-scoped resources.
		Namespace: r.Namespace, Name: r.Object.Metadata.Name, UID: r.Object.Metadata.UID,
	}, "", nil
}
