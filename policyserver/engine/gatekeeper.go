package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"sigs.k8s.io/yaml"
)

// ConstraintTemplate is the Rego a Gatekeeper ConstraintTemplate carries, ready for
// CompileRego.
type ConstraintTemplate struct {
	// Kind is the constraint kind the template defines, e.g. K8sRequiredLabels.
	Kind string
	// Files are the template's Rego module and its libs.
	Files map[string]string
	// Entrypoint is "<package path>/violation".
	Entrypoint string
}

type templateTarget struct {
	Target string   `json:"target"`
	Rego   string   `json:"rego"`
	Libs   []string `json:"libs"`
	Code   []struct {
		Engine string `json:"engine"`
		Source struct {
			Rego string   `json:"rego"`
			Libs []string `json:"libs"`
		} `json:"source"`
	} `json:"code"`
}

// ParseConstraintTemplate reads a templates.gatekeeper.sh ConstraintTemplate (v1 or v1beta1),
// taking the Rego either from targets[].rego/libs or from a code entry with engine Rego.
func ParseConstraintTemplate(doc []byte) (ConstraintTemplate, error) {
	var ct struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			CRD struct {
				Spec struct {
					Names struct {
						Kind string `json:"kind"`
					} `json:"names"`
				} `json:"spec"`
			} `json:"crd"`
			Targets []templateTarget `json:"targets"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(doc, &ct); err != nil {
		return ConstraintTemplate{}, fmt.Errorf("parse ConstraintTemplate: %w", err)
	}
	if ct.Kind != "ConstraintTemplate" || !strings.HasPrefix(ct.APIVersion, "templates.gatekeeper.sh/") {
		return ConstraintTemplate{}, fmt.Errorf("not a Gatekeeper ConstraintTemplate (apiVersion %q, kind %q)", ct.APIVersion, ct.Kind)
	}
	if len(ct.Spec.Targets) != 1 {
		return ConstraintTemplate{}, fmt.Errorf("ConstraintTemplate has %d targets, want exactly 1", len(ct.Spec.Targets))
	}
	t := ct.Spec.Targets[0]
	rego, libs := t.Rego, t.Libs
	for _, c := range t.Code {
		if c.Engine == "Rego" && rego == "" {
			rego, libs = c.Source.Rego, c.Source.Libs
		}
	}
	if rego == "" {
		return ConstraintTemplate{}, errors.New("ConstraintTemplate has no Rego source")
	}
	pkgPath, err := regoPackage(rego)
	if err != nil {
		return ConstraintTemplate{}, err
	}
	files := map[string]string{"template.rego": rego}
	for i, lib := range libs {
		files[fmt.Sprintf("lib%d.rego", i)] = lib
	}
	return ConstraintTemplate{
		Kind:       ct.Spec.CRD.Spec.Names.Kind,
		Files:      files,
		Entrypoint: pkgPath + "/violation",
	}, nil
}

// regoPackage returns the template's package path as an entrypoint names it ("a/b"). Which Rego
// version the template is written in is only settled when it compiles, but a package clause
// reads the same in both, so the first version that parses the module gives the path as OPA
// reads it (package a["b"] is a/b). A module neither version parses keeps the first package
// line: the compile that follows reports the syntax error better than this could.
func regoPackage(src string) (string, error) {
	for _, v := range []ast.RegoVersion{ast.RegoV0, ast.RegoV1} {
		m, err := ast.ParseModuleWithOpts("template.rego", src, ast.ParserOptions{RegoVersion: v})
		if err == nil && m != nil && m.Package != nil && len(m.Package.Path) > 1 {
			parts := make([]string, 0, len(m.Package.Path)-1)
			for _, term := range m.Package.Path[1:] {
				s, ok := term.Value.(ast.String)
				if !ok {
					return "", fmt.Errorf("package %s: every part of a package path must be a name", m.Package.Path)
				}
				parts = append(parts, string(s))
			}
			return strings.Join(parts, "/"), nil
		}
	}
	for line := range strings.Lines(src) {
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == "package" {
			return strings.ReplaceAll(fields[1], ".", "/"), nil
		}
	}
	return "", errors.New("Rego source has no package clause")
}
