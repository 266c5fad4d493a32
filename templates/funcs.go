package templates

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// funcs holds what the template functions of one resolution share.
type funcs struct {
	ctx context.Context
	cfg Config
}

func (f *funcs) funcMap() template.FuncMap {
	m := sprigFuncs(f.cfg.Hub)
	for name, fn := range map[string]any{
		"fromSecret":             f.fromSecret,
		"fromConfigMap":          f.fromConfigMap,
		"fromClusterClaim":       f.fromClusterClaim,
		"lookupClusterClaim":     f.lookupClusterClaim,
		"lookup":                 f.lookup,
		"getNodesWithExactRoles": f.getNodesWithExactRoles,
		"hasNodesWithExactRoles": f.hasNodesWithExactRoles,
		"copySecretData":         f.copySecretData,
		"copyConfigMapData":      f.copyConfigMapData,
		"protect":                f.protect,
		"base64enc":              base64enc,
		"base64dec":              base64dec,
		"b64enc":                 base64enc,
		"b64dec":                 base64dec,
		"indent":                 indentLines,
		"autoindent":             autoindentMisplaced,
		"atoi":                   atoi,
		"toInt":                  toInt,
		"toBool":                 toBool,
		"toLiteral":              func(s string) string { return s },
	} {
		m[name] = fn
	}
	return m
}

// checkNamespace enforces Config.Namespace: hub templates without a service account read only
// the root's namespace, and of cluster-scoped objects only those on the allow-list.
func (f *funcs) checkNamespace(apiVersion, kind, namespace, name string) error {
	if f.cfg.Namespace == "" {
		return nil
	}
	if namespace == "" {
		if f.cfg.clusterScopedAllowed(apiVersion, kind, name) {
			return nil
		}
		return fmt.Errorf("cluster-scoped objects may not be read by hub templates without hubTemplateOptions.serviceAccountName; only namespace %s is allowed", f.cfg.Namespace)
	}
	if namespace != f.cfg.Namespace {
		return fmt.Errorf("the namespace %s is not allowed: hub templates may only read objects in the policy's namespace %s, unless hubTemplateOptions.serviceAccountName names a service account that may read them", namespace, f.cfg.Namespace)
	}
	return nil
}

func (f *funcs) get(apiVersion, kind, namespace, name string) (*unstructured.Unstructured, error) {
	if f.cfg.Reader == nil {
		return nil, errors.New("no object reader is configured")
	}
	if err := f.checkNamespace(apiVersion, kind, namespace, name); err != nil {
		return nil, err
	}
	return f.cfg.Reader.Get(f.ctx, apiVersion, kind, namespace, name)
}

// dataOf reads the data map of a Secret or ConfigMap, which must exist.
func (f *funcs) dataOf(kind, namespace, name string) (map[string]string, error) {
	obj, err := f.get("v1", kind, namespace, name)
	if err != nil {
		return nil, fmt.Errorf("failed to get the %s %s from %s: %w", strings.ToLower(kind), name, namespace, err)
	}
	if obj == nil {
		return nil, fmt.Errorf("failed to get the %s %s from %s: %s %q not found", strings.ToLower(kind), name, namespace, strings.ToLower(kind)+"s", name)
	}
	data, _, err := unstructured.NestedStringMap(obj.Object, "data")
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: data: %w", kind, namespace, name, err)
	}
	return data, nil
}

// fromSecret returns the value of a Secret's key as stored: base64. A missing key is "", as in
// OCM; a missing Secret is an error, so a policy never applies a half-resolved object.
func (f *funcs) fromSecret(namespace, name, key string) (string, error) {
	if err := f.secretsAllowed(); err != nil {
		return "", err
	}
	data, err := f.dataOf("Secret", namespace, name)
	if err != nil {
		return "", err
	}
	if f.cfg.Protect != nil {
		return f.cfg.Protect(data[key])
	}
	return data[key], nil
}

// secretsAllowed refuses Secret values in hub templates that cannot encrypt them: OCM never
// lets a hub Secret reach a replica in clear, and neither does Regent.
func (f *funcs) secretsAllowed() error {
	if f.cfg.Hub && f.cfg.Protect == nil {
		return errors.New("hub templates may not copy Secret values: this hub does not encrypt values for managed clusters")
	}
	return nil
}

func (f *funcs) fromConfigMap(namespace, name, key string) (string, error) {
	data, err := f.dataOf("ConfigMap", namespace, name)
	if err != nil {
		return "", err
	}
	return data[key], nil
}

// copySecretData and copyConfigMapData emit the whole data map in YAML flow form, so the
// unquoted action parses as a map under the key it fills.
func (f *funcs) copySecretData(namespace, name string) (string, error) {
	return f.copyData("Secret", namespace, name)
}

func (f *funcs) copyConfigMapData(namespace, name string) (string, error) {
	return f.copyData("ConfigMap", namespace, name)
}

func (f *funcs) copyData(kind, namespace, name string) (string, error) {
	if kind == "Secret" {
		if err := f.secretsAllowed(); err != nil {
			return "", err
		}
	}
	data, err := f.dataOf(kind, namespace, name)
	if err != nil {
		return "", err
	}
	if f.cfg.Protect != nil && kind == "Secret" {
		// Secret values leave the hub only encrypted, as OCM does for copied Secrets.
		for k, v := range data {
			if data[k], err = f.cfg.Protect(v); err != nil {
				return "", err
			}
		}
	}
	b, err := json.Marshal(data)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func (f *funcs) fromClusterClaim(name string) (string, error) {
	v, found, err := f.clusterClaim(name)
	if err == nil && !found {
		err = fmt.Errorf("failed to get the cluster claim %s: clusterclaims.cluster.open-cluster-management.io %q not found", name, name)
	}
	return v, err
}

// lookupClusterClaim is fromClusterClaim for a claim that may be missing: then it is "".
func (f *funcs) lookupClusterClaim(name string) (string, error) {
	v, _, err := f.clusterClaim(name)
	return v, err
}

func (f *funcs) clusterClaim(name string) (string, bool, error) {
	if f.cfg.Namespace != "" {
		return "", false, errors.New("cluster claims are not available in hub templates")
	}
	if name == "" {
		return "", false, errors.New("a claim name must be provided")
	}
	obj, err := f.get("cluster.open-cluster-management.io/v1alpha1", "ClusterClaim", "", name)
	if err != nil {
		return "", false, fmt.Errorf("failed to get the cluster claim %s: %w", name, err)
	}
	if obj == nil {
		return "", false, nil
	}
	v, _, _ := unstructured.NestedString(obj.Object, "spec", "value")
	return v, true, nil
}

// lookup returns the object as a map, or an empty map when it does not exist. With an empty
// name it lists the kind (optionally by label selectors) and returns {"items": [...]}.
func (f *funcs) lookup(apiVersion, kind, namespace, name string, selectors ...string) (map[string]any, error) {
	if name != "" {
		obj, err := f.get(apiVersion, kind, namespace, name)
		if err != nil {
			return nil, fmt.Errorf("lookup %s %s %s/%s: %w", apiVersion, kind, namespace, name, err)
		}
		if obj == nil {
			return map[string]any{}, nil
		}
		return obj.Object, nil
	}
	if f.cfg.Reader == nil {
		return nil, errors.New("no object reader is configured")
	}
	if err := f.checkNamespace(apiVersion, kind, namespace, ""); err != nil {
		return nil, fmt.Errorf("lookup %s %s %s: %w", apiVersion, kind, namespace, err)
	}
	items, err := f.cfg.Reader.List(f.ctx, apiVersion, kind, namespace, strings.Join(selectors, ","))
	if err != nil {
		return nil, fmt.Errorf("lookup %s %s %s: %w", apiVersion, kind, namespace, err)
	}
	list := make([]any, 0, len(items))
	for _, it := range items {
		list = append(list, it.Object)
	}
	return map[string]any{"items": list}, nil
}

func (f *funcs) protect(value string) (string, error) {
	if f.cfg.Protect == nil {
		if f.cfg.Hub {
			return "", errors.New("protect is not available: this hub does not encrypt values for managed clusters")
		}
		return "", errors.New("protect is only available in hub templates")
	}
	if value == "" {
		return "", nil
	}
	return f.cfg.Protect(value)
}

// nodeRoleLabel prefixes the labels that give a Node its roles.
const nodeRoleLabel = "node-role.kubernetes.io/"

// getNodesWithExactRoles lists, as {"items": [...]}, the Nodes that have every role named and no
// other, the worker role aside (OCM counts it as no role of its own).
func (f *funcs) getNodesWithExactRoles(roles ...string) (map[string]any, error) {
	var want []string
	for _, r := range roles {
		if strings.TrimSpace(r) != "" {
			want = append(want, nodeRoleLabel+r)
		}
	}
	if len(want) == 0 {
		return nil, errors.New("getNodesWithExactRoles: at least one role must be named")
	}
	// A selector of label keys alone: the Nodes that have each of them.
	nodes, err := f.lookup("v1", "Node", "", "", want...)
	if err != nil {
		return nil, err
	}
	allowed := append(want, nodeRoleLabel+"worker")
	items, _ := nodes["items"].([]any)
	out := make([]any, 0, len(items))
	for _, it := range items {
		node, _ := it.(map[string]any)
		labels, _, _ := unstructured.NestedStringMap(node, "metadata", "labels")
		exact := true
		for k := range labels {
			if strings.HasPrefix(k, nodeRoleLabel) && !slices.Contains(allowed, k) {
				exact = false
				break
			}
		}
		if exact {
			out = append(out, node)
		}
	}
	return map[string]any{"items": out}, nil
}

// hasNodesWithExactRoles says whether getNodesWithExactRoles finds any Node.
func (f *funcs) hasNodesWithExactRoles(roles ...string) (bool, error) {
	nodes, err := f.getNodesWithExactRoles(roles...)
	if err != nil {
		return false, err
	}
	items, _ := nodes["items"].([]any)
	return len(items) > 0, nil
}

// atoi is OCM's: a string that is no integer is 0.
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// autoindentMisplaced runs only for an autoindent expandAutoindent could not place (its action
// does not start on the line it sits on).
func autoindentMisplaced(string) (string, error) {
	return "", errors.New("autoindent must be in an action that starts on its own line; use indent N instead")
}

func base64enc(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func base64dec(s string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "", fmt.Errorf("base64dec: %w", err)
	}
	return string(b), nil
}

// indentLines pads every line but the first: the action itself sits where the first line goes.
func indentLines(spaces int, s string) string {
	pad := strings.Repeat(" ", spaces)
	return strings.TrimRight(strings.ReplaceAll(s, "\n", "\n"+pad), " \n")
}

func toInt(v any) (int, error) {
	switch x := v.(type) {
	case int:
		return x, nil
	case int64:
		return int(x), nil
	case float64:
		return int(x), nil
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(x))
		if err != nil {
			return 0, fmt.Errorf("toInt: %w", err)
		}
		return n, nil
	case nil:
		return 0, nil
	}
	return 0, fmt.Errorf("toInt: cannot convert %T", v)
}

func toBool(v any) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(x))
		if err != nil {
			return false, fmt.Errorf("toBool: %w", err)
		}
		return b, nil
	case nil:
		return false, nil
	}
	return false, fmt.Errorf("toBool: cannot convert %T", v)
}
