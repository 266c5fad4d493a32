package quickstart

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/api/scheme"
)

//go:embed sample.yaml
var sample []byte

// SamplePolicy is the namespace/name of the sample's root policy.
const SamplePolicy = "policies/sample-namespace"

// applySample creates the sample's objects on the hub; objects already there are kept.
func applySample(ctx context.Context, hub *rest.Config) error {
	c, err := client.New(hub, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(sample), 4096)
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
