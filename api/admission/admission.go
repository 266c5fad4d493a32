// Package admission embeds the ValidatingAdmissionPolicies Regent installs on the hub with its
// CRDs: checks OCM makes in its propagator (its webhook's name length; its refusal to propagate a
// root Policy in a managed cluster's namespace, which OCM enforces by deleting it) that a CRD's
// own validation rules cannot express, because they read the object's namespace or labels.
// Regent runs no webhook on the hub; the apiserver evaluates these CEL rules itself.
package admission

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var files embed.FS

// Hub returns the hub's admission policies and their bindings, in the order to create them.
func Hub() ([]client.Object, error) {
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, err
	}
	var out []client.Object
	for _, name := range names {
		raw, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		r := utilyaml.NewDocumentDecoder(io.NopCloser(bytes.NewReader(raw)))
		buf := make([]byte, len(raw))
		for {
			n, err := r.Read(buf)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			obj, err := decode(buf[:n])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			out = append(out, obj)
		}
	}
	return out, nil
}

func decode(doc []byte) (client.Object, error) {
	var head struct{ Kind string }
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return nil, err
	}
	var obj client.Object
	switch head.Kind {
	case "ValidatingAdmissionPolicy":
		obj = &admissionregistrationv1.ValidatingAdmissionPolicy{}
	case "ValidatingAdmissionPolicyBinding":
		obj = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	default:
		return nil, fmt.Errorf("unexpected kind %q", head.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, err
	}
	return obj, nil
}
