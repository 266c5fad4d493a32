package templates

import (
	"fmt"
	"strings"
	"text/template"

	sprig "github.com/Masterminds/sprig/v3"
	yaml "go.yaml.in/yaml/v3"
)

// deniedSprigFunctions are the sprig functions OCM's go-template-utils refuses in every policy
// template: they would show the controller's environment.
var deniedSprigFunctions = []string{"env", "expandenv"}

// unrepeatableSprigFunctions answer differently on every call with the same input (the clock,
// randomness, fresh keys, DNS). A hub template using one would resolve to a new replica on every
// propagation, and every replica written makes the hub propagate its root again: a write loop.
// Hub templates refuse them; managed-cluster templates, evaluated on their own schedule, keep
// them, as on OCM.
var unrepeatableSprigFunctions = []string{
	"now", "ago", "randAlphaNum", "randAlpha", "randAscii", "randNumeric", "randBytes", "randInt",
	"uuidv4", "shuffle", "bcrypt", "htpasswd", "encryptAES", "getHostByName",
	"genPrivateKey", "genCA", "genCAWithKey", "genSelfSignedCert", "genSelfSignedCertWithKey",
	"genSignedCert", "genSignedCertWithKey",
}

// sprigFuncs is the sprig library as OCM offers it in policy templates: every function but those
// of deniedSprigFunctions, which fail saying why rather than being unknown (in hub templates those
// of unrepeatableSprigFunctions too); plus OCM's own
// spellings of sprig's JSON functions and its YAML pair. The functions of funcs.go take
// precedence where the names meet (base64dec, indent, toInt, ...), as OCM's own do over sprig's.
func sprigFuncs(hub bool) template.FuncMap {
	m := sprig.TxtFuncMap()
	for _, name := range deniedSprigFunctions {
		m[name] = func(...any) (any, error) {
			return nil, fmt.Errorf("use of denylisted template function: function '%s' is considered a security risk", name)
		}
	}
	if hub {
		for _, name := range unrepeatableSprigFunctions {
			m[name] = func(...any) (any, error) {
				return nil, fmt.Errorf("function '%s' is not allowed in hub templates: its result changes on every propagation, so every cluster's replica would be rewritten without end", name)
			}
		}
	}
	for alias, name := range map[string]string{
		"fromJSON": "fromJson", "mustFromJSON": "mustFromJson",
		"toJSON": "toJson", "mustToJSON": "mustToJson",
		"toRawJSON": "toRawJson", "mustToRawJSON": "mustToRawJson",
	} {
		m[alias] = m[name]
	}
	m["toYAML"], m["toYaml"] = toYAML, toYAML
	m["fromYAML"], m["fromYaml"] = fromYAML, fromYAML
	return m
}

// toYAML renders v as YAML indented by two spaces, without the trailing newline: the result is
// meant to be piped into indent or autoindent under a key.
func toYAML(v any) (out string, err error) {
	// The encoder panics on values it cannot represent (a func, a channel).
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("toYAML: %v", r)
		}
	}()
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("toYAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return "", fmt.Errorf("toYAML: %w", err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// fromYAML parses one YAML document into maps, lists and scalars.
func fromYAML(s string) (any, error) {
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		return nil, fmt.Errorf("fromYAML: %w", err)
	}
	return v, nil
}
