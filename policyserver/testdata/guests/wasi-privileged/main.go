// Command wasi-privileged is a Kubewarden WASI-mode policy: it denies pods that run a privileged
// container unless the pod's namespace is listed in the settings' skipNamespaces. The host runs it
// as a command with argv[1] "validate" or "validate-settings", the JSON payload on stdin and the
// answer on stdout.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
)

type settings struct {
	SkipNamespaces []string `json:"skipNamespaces"`
}

type securityContext struct {
	Privileged *bool `json:"privileged"`
}

type container struct {
	Name            string           `json:"name"`
	SecurityContext *securityContext `json:"securityContext"`
}

type pod struct {
	Spec struct {
		Containers          []container `json:"containers"`
		InitContainers      []container `json:"initContainers"`
		EphemeralContainers []container `json:"ephemeralContainers"`
	} `json:"spec"`
}

type validationRequest struct {
	Request struct {
		Namespace string `json:"namespace"`
		Object    pod    `json:"object"`
	} `json:"request"`
	Settings settings `json:"settings"`
}

type validationResponse struct {
	Accepted bool   `json:"accepted"`
	Message  string `json:"message,omitempty"`
	Code     int    `json:"code,omitempty"`
}

type settingsResponse struct {
	Valid   bool   `json:"valid"`
	Message string `json:"message,omitempty"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: policy validate|validate-settings|protocol-version")
		os.Exit(2)
	}
	var answer any
	switch os.Args[1] {
	case "validate":
		answer = validate()
	case "validate-settings":
		answer = validateSettings()
	case "protocol-version":
		answer = "v1"
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
	if err := json.NewEncoder(os.Stdout).Encode(answer); err != nil {
		os.Exit(1)
	}
}

func validate() validationResponse {
	var req validationRequest
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		return validationResponse{Accepted: false, Message: "cannot decode request: " + err.Error(), Code: 400}
	}
	if slices.Contains(req.Settings.SkipNamespaces, req.Request.Namespace) {
		return validationResponse{Accepted: true}
	}
	spec := req.Request.Object.Spec
	for _, list := range [][]container{spec.Containers, spec.InitContainers, spec.EphemeralContainers} {
		for _, c := range list {
			if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
				return validationResponse{Accepted: false, Message: fmt.Sprintf("privileged container %q is not allowed", c.Name)}
			}
		}
	}
	return validationResponse{Accepted: true}
}

func validateSettings() settingsResponse {
	raw := map[string]json.RawMessage{}
	if err := json.NewDecoder(os.Stdin).Decode(&raw); err != nil {
		return settingsResponse{Valid: false, Message: "settings are not a JSON object: " + err.Error()}
	}
	for key := range raw {
		if key != "skipNamespaces" {
			return settingsResponse{Valid: false, Message: fmt.Sprintf("unknown setting %q", key)}
		}
	}
	var s settings
	if err := json.Unmarshal(mustJSON(raw), &s); err != nil {
		return settingsResponse{Valid: false, Message: "skipNamespaces must be a list of strings"}
	}
	return settingsResponse{Valid: true}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
