package templates

import (
	"bytes"

	yaml3 "go.yaml.in/yaml/v3"
)

// jsonToYAML renders an object definition as the block YAML templates run over, with no line
// folding: a long single-quoted scalar folded onto two lines (sigs.k8s.io/yaml wraps at 80
// columns) splits a template action, so a typed function's quotes could no longer be found and
// a string literal inside the action could break. Scalars keep their tags (a JSON number stays a
// number) and get the quoting YAML needs, which is single quotes for a template's "{{".
func jsonToYAML(raw []byte) ([]byte, error) {
	var doc yaml3.Node
	if err := yaml3.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	blockStyle(&doc)
	var buf bytes.Buffer
	enc := yaml3.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// blockStyle drops the flow and quoting styles the JSON was parsed with, so the encoder writes
// block collections and quotes a scalar only where YAML needs it.
func blockStyle(n *yaml3.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}
