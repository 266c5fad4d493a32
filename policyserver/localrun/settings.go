package localrun

import (
	"encoding/json"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// Settings reads a policy's settings from JSON or YAML. A Gatekeeper constraint gives its
// spec.parameters, which is what the policy server hands a template as settings, so the
// constraint an author already has is enough.
func Settings(doc []byte) (json.RawMessage, error) {
	if strings.TrimSpace(string(doc)) == "" {
		return nil, nil
	}
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("parse settings: %w", err)
	}
	var constraint struct {
		APIVersion string `json:"apiVersion"`
		Spec       struct {
			Parameters json.RawMessage `json:"parameters"`
		} `json:"spec"`
	}
	if json.Unmarshal(j, &constraint) == nil && strings.HasPrefix(constraint.APIVersion, "constraints.gatekeeper.sh/") {
		return constraint.Spec.Parameters, nil
	}
	return j, nil
}
