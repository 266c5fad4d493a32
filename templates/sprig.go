package templates

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// sprigSubset is the part of the sprig library OCM allows in policy templates, written against
// the standard library (sprig itself is not a dependency of this module).
func sprigSubset() map[string]any {
	return map[string]any{
		"cat":       cat,
		"contains":  func(sub, s string) bool { return strings.Contains(s, sub) },
		"default":   dfault,
		"empty":     empty,
		"fromJson":  fromJSON,
		"hasPrefix": func(prefix, s string) bool { return strings.HasPrefix(s, prefix) },
		"hasSuffix": func(suffix, s string) bool { return strings.HasSuffix(s, suffix) },
		"join":      join,
		"list":      func(v ...any) []any { return v },
		"dict":      dict,
		"lower":     strings.ToLower,
		"upper":     strings.ToUpper,
		"quote":     quote,
		"replace":   func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
		"split":     split,
		"splitn":    splitn,
		"ternary":   func(a, b any, cond bool) any { return map[bool]any{true: a, false: b}[cond] },
		"trim":      strings.TrimSpace,
		"trimAll":   func(cut, s string) string { return strings.Trim(s, cut) },
		"trunc":     trunc,
		"toJson":    toJSON,
		"toRawJson": toJSON,
		"b64enc":    base64enc,
		"b64dec":    base64dec,
		"add":       func(a, b int) int { return a + b },
		"sub":       func(a, b int) int { return a - b },
		"mul":       func(a, b int) int { return a * b },
		"toString":  func(v any) string { return fmt.Sprint(v) },
	}
}

func cat(v ...any) string {
	parts := make([]string, 0, len(v))
	for _, x := range v {
		if x != nil {
			parts = append(parts, fmt.Sprint(x))
		}
	}
	return strings.Join(parts, " ")
}

func empty(v any) bool {
	if v == nil {
		return true
	}
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return r.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return r.IsNil()
	}
	return r.IsZero()
}

// dfault is sprig's "default": the given value unless it is empty.
func dfault(d any, given ...any) any {
	if len(given) == 0 || empty(given[0]) {
		return d
	}
	return given[0]
}

func fromJSON(s string) (any, error) {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, fmt.Errorf("fromJson: %w", err)
	}
	return v, nil
}

func toJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("toJson: %w", err)
	}
	return string(b), nil
}

func join(sep string, v any) string {
	r := reflect.ValueOf(v)
	if r.Kind() != reflect.Slice && r.Kind() != reflect.Array {
		return fmt.Sprint(v)
	}
	parts := make([]string, r.Len())
	for i := range parts {
		parts[i] = fmt.Sprint(r.Index(i).Interface())
	}
	return strings.Join(parts, sep)
}

func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, fmt.Errorf("dict: odd number of arguments")
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		m[fmt.Sprint(kv[i])] = kv[i+1]
	}
	return m, nil
}

func quote(v ...any) string {
	parts := make([]string, 0, len(v))
	for _, x := range v {
		if x != nil {
			parts = append(parts, fmt.Sprintf("%q", fmt.Sprint(x)))
		}
	}
	return strings.Join(parts, " ")
}

// split and splitn return sprig's shape: a map keyed _0, _1, ...
func split(sep, s string) map[string]string { return indexed(strings.Split(s, sep)) }

func splitn(sep string, n int, s string) map[string]string { return indexed(strings.SplitN(s, sep, n)) }

func indexed(parts []string) map[string]string {
	m := make(map[string]string, len(parts))
	for i, p := range parts {
		m[fmt.Sprintf("_%d", i)] = p
	}
	return m
}

func trunc(n int, s string) string {
	switch {
	case n < 0 && -n < len(s):
		return s[len(s)+n:]
	case n >= 0 && n < len(s):
		return s[:n]
	}
	return s
}
