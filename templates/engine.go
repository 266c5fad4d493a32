package templates

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Delimiters of the two kinds of OCM templates.
const (
	SpokeStart, SpokeStop = "{{", "}}"
	HubStart, HubStop     = "{{hub", "hub}}"
)

// DisableAnnotation set to "true" on a policy leaves its "{{" text as it is.
const DisableAnnotation = "policy.open-cluster-management.io/disable-templates"

// Reader reads the objects templates name. Get returns nil and no error when the object does
// not exist; List lists a kind in a namespace ("" for all or cluster-scoped) by label selector.
type Reader interface {
	Get(ctx context.Context, apiVersion, kind, namespace, name string) (*unstructured.Unstructured, error)
	List(ctx context.Context, apiVersion, kind, namespace, selector string) ([]unstructured.Unstructured, error)
}

// Config says how one resolution runs.
type Config struct {
	// Hub selects the "{{hub ... hub}}" delimiters; otherwise "{{ ... }}".
	Hub bool
	// Reader serves fromSecret, fromConfigMap, fromClusterClaim, lookup and copy*Data.
	Reader Reader
	// Namespace, when set, is the only namespace templates may read, and cluster-scoped reads
	// are refused but for ClusterScopedAllowList: hub templates resolved without a service account
	// may read only the root policy's namespace. Empty, reads go wherever Reader lets them.
	Namespace string
	// ClusterScopedAllowList names the cluster-scoped objects templates may read despite
	// Namespace: OCM lets hub templates read the ManagedCluster they are resolved for.
	ClusterScopedAllowList []ClusterScopedObject
	// Data is the template's dot (.ManagedClusterName and friends on the hub).
	Data any
	// Protect encrypts a value for the managed cluster; nil makes "protect" an error.
	Protect func(plaintext string) (string, error)
}

// ClusterScopedObject names a cluster-scoped object by API group, kind and name.
type ClusterScopedObject struct {
	Group, Kind, Name string
}

// clusterScopedAllowed says whether the cluster-scoped object is on the allow-list.
func (c Config) clusterScopedAllowed(apiVersion, kind, name string) bool {
	group, _, found := strings.Cut(apiVersion, "/")
	if !found {
		group = "" // the core group: "v1"
	}
	for _, o := range c.ClusterScopedAllowList {
		if o.Group == group && o.Kind == kind && o.Name == name && name != "" {
			return true
		}
	}
	return false
}

func (c Config) delims() (string, string) {
	if c.Hub {
		return HubStart, HubStop
	}
	return SpokeStart, SpokeStop
}

// HasTemplates reports whether text holds an action for cfg's delimiters.
func HasTemplates(text []byte, hub bool) bool {
	if hub {
		return bytes.Contains(text, []byte(HubStart))
	}
	return bytes.Contains(text, []byte(SpokeStart))
}

// ResolveJSON resolves the templates of a JSON object definition and returns it as JSON.
func ResolveJSON(ctx context.Context, raw []byte, cfg Config) ([]byte, error) {
	y, err := jsonToYAML(raw)
	if err != nil {
		return nil, fmt.Errorf("convert the object definition to YAML: %w", err)
	}
	out, err := ResolveText(ctx, unquoteTyped(string(y), cfg), cfg)
	if err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSON([]byte(out))
	if err != nil {
		return nil, fmt.Errorf("the resolved template is not valid YAML: %w", err)
	}
	return j, nil
}

// ResolveText runs the templates of a YAML text, such as object-templates-raw.
func ResolveText(ctx context.Context, text string, cfg Config) (string, error) {
	start, stop := cfg.delims()
	text = expandAutoindent(text, start)
	f := &funcs{ctx: ctx, cfg: cfg}
	t, err := template.New("tmpl").Delims(start, stop).Option("missingkey=error").Funcs(f.funcMap()).Parse(text)
	if err != nil {
		return "", fmt.Errorf("failed to parse the template: %w", err)
	}
	var buf strings.Builder
	if err := t.Execute(&buf, cfg.Data); err != nil {
		return "", fmt.Errorf("failed to resolve the template: %w", err)
	}
	return buf.String(), nil
}

// typedFuncs emit values that must not stay YAML strings: a template whose pipeline uses one of
// them loses the quotes YAML rendering put around it.
var typedFuncs = []string{"toInt", "toBool", "toLiteral", "copySecretData", "copyConfigMapData"}

// unquoteTyped removes the quotes around a whole-value template that uses a typed function.
func unquoteTyped(y string, cfg Config) string {
	start, stop := cfg.delims()
	body := `(?:[^'\n]|'')*?`
	re := regexp.MustCompile(`'(` + regexp.QuoteMeta(start) + body + `\b(?:` + strings.Join(typedFuncs, "|") + `)\b` + body + regexp.QuoteMeta(stop) + `)'`)
	return re.ReplaceAllStringFunc(y, func(m string) string {
		inner := m[1 : len(m)-1]
		// Inside the action, a single-quoted YAML scalar doubles its quotes.
		return strings.ReplaceAll(inner, "''", "'")
	})
}

var autoindentRe = regexp.MustCompile(`\bautoindent\b`)

// expandAutoindent turns "autoindent" into "indent N", N being the column of the action's
// opening delimiter, so a multi-line value lines up under the line it starts on.
func expandAutoindent(text, start string) string {
	if !strings.Contains(text, "autoindent") {
		return text
	}
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		if !strings.Contains(line, "autoindent") {
			continue
		}
		col := strings.Index(line, start)
		if col < 0 {
			continue
		}
		lines[i] = autoindentRe.ReplaceAllString(line, fmt.Sprintf("indent %d", col))
	}
	return strings.Join(lines, "\n")
}
