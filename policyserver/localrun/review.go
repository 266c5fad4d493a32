package localrun

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// Request reads what an author has at hand as the request of an AdmissionReview: a whole
// AdmissionReview, its request alone, or a plain Kubernetes object, which is reviewed as being
// created (as Gatekeeper's gator reviews an object). JSON or YAML.
func Request(doc []byte) (json.RawMessage, error) {
	obj, err := decode(doc)
	if err != nil {
		return nil, fmt.Errorf("parse request: %w", err)
	}
	if obj == nil {
		return nil, errors.New("request is empty")
	}
	if obj["kind"] == "AdmissionReview" {
		req, ok := obj["request"].(map[string]any)
		if !ok {
			return nil, errors.New("AdmissionReview has no request")
		}
		return json.Marshal(req)
	}
	// A bare request names its operation and the kind it reviews as a {group, version, kind}.
	if _, isKindRef := obj["kind"].(map[string]any); isKindRef && obj["operation"] != nil {
		return json.Marshal(obj)
	}
	return createRequest(obj)
}

// decode reads YAML or JSON keeping numbers as written: a float64 round trip would turn a large
// integer such as a resource version or a size into 1e+06 in what the policy sees.
func decode(doc []byte) (map[string]any, error) {
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil {
		return nil, err
	}
	return obj, nil
}

func createRequest(obj map[string]any) (json.RawMessage, error) {
	kind, _ := obj["kind"].(string)
	apiVersion, _ := obj["apiVersion"].(string)
	if kind == "" || apiVersion == "" {
		return nil, errors.New("request is neither an AdmissionReview, its request, nor a Kubernetes object (apiVersion and kind)")
	}
	group, version, found := strings.Cut(apiVersion, "/")
	if !found {
		group, version = "", apiVersion
	}
	meta, _ := obj["metadata"].(map[string]any)
	req := map[string]any{
		"kind":      map[string]any{"group": group, "version": version, "kind": kind},
		"operation": "CREATE",
		"object":    obj,
	}
	for _, f := range []string{"name", "namespace"} {
		if v, ok := meta[f].(string); ok && v != "" {
			req[f] = v
		}
	}
	return json.Marshal(req)
}

// Review wraps a request in the admission.k8s.io/v1 AdmissionReview a policy server receives.
func Review(request json.RawMessage) []byte {
	b, _ := json.Marshal(struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		Request    json.RawMessage `json:"request"`
	}{"admission.k8s.io/v1", "AdmissionReview", request})
	return b
}

// ReviewOf is Review(Request(doc)), except that an AdmissionReview keeps its own apiVersion.
func ReviewOf(doc []byte) ([]byte, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	_ = yaml.Unmarshal(doc, &head)
	req, err := Request(doc)
	if err != nil {
		return nil, err
	}
	if head.Kind == "AdmissionReview" && head.APIVersion != "" {
		b, _ := json.Marshal(struct {
			APIVersion string          `json:"apiVersion"`
			Kind       string          `json:"kind"`
			Request    json.RawMessage `json:"request"`
		}{head.APIVersion, head.Kind, req})
		return b, nil
	}
	return Review(req), nil
}
