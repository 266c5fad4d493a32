package dryrun_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/spoke-addon/configpolicy/dryrun"
	"regent.dev/regent/test/corpora"
)

// TestDryRun_PolicyCollection dry-runs every Policy of OCM's policy-collection that holds a
// ConfigurationPolicy against an empty cluster: each must give a compliance state and a message,
// never an error, as `regent dryrun` on them would.
func TestDryRun_PolicyCollection(t *testing.T) {
	dir := corpora.Dir(t, "policy-collection")
	ran := 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			doc := map[string]any{}
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				return nil // not every YAML file of the collection is a manifest
			}
			if doc["kind"] != "Policy" || !strings.Contains(string(mustYAML(t, doc)), "kind: ConfigurationPolicy") {
				continue
			}
			p, err := dryrun.ReadPolicy(mustYAML(t, doc))
			if err != nil {
				if strings.Contains(err.Error(), "no ConfigurationPolicy in its policy-templates") {
					continue // a ConfigurationPolicy nested deeper (a PolicyGenerator's, say)
				}
				t.Errorf("%s: %v", path, err)
				continue
			}
			r, err := dryrun.Run(context.Background(), p, nil, now)
			switch {
			case err != nil:
				t.Errorf("%s (%s): %v", path, p.Name, err)
			case r.Status.ComplianceState != policyv1.Compliant && r.Status.ComplianceState != policyv1.NonCompliant, r.Message == "":
				t.Errorf("%s (%s): state %q, message %q", path, p.Name, r.Status.ComplianceState, r.Message)
			default:
				ran++
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if ran == 0 {
		t.Fatal("no ConfigurationPolicy found in the collection")
	}
	t.Logf("dry-ran %d ConfigurationPolicies", ran)
}

func mustYAML(t *testing.T, v any) []byte {
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
