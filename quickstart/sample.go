package quickstart

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/api/scheme"
)

//go:embed sample.yaml
var sample []byte

//go:embed no-privileged.rego
var noPrivileged []byte

// SamplePolicy is the namespace/name of the sample's root policy.
const SamplePolicy = "policies/sample-namespace"

// applySample writes the sample's admission module into dir and creates the sample's objects on
// the hub; objects already there are kept.
func applySample(ctx context.Context, hub *rest.Config, dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "no-privileged.rego"), noPrivileged, 0o644); err != nil {
		return err
	}
	c, err := client.New(hub, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	docs := bytes.ReplaceAll(sample, []byte("$(QUICKSTART_DIR)"), []byte(dir))
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(docs), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("sample: %w", err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("sample %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
}
