package configpolicy

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The comparison core follows OCM's config-policy-controller: a template is a partial object.
// With musthave it must be a subset of the object: maps are compared key by key, and every item
// of a template list must be found in the object's list (a map item is found when it is itself a
// subset of an object item). With mustonlyhave the fields the template gives must match exactly:
// maps have no extra keys, lists have the same items in any order. Keys the template does not
// name at the top level are never compared, so server-set fields such as status or
// metadata.uid never make an object non-compliant by themselves.

// matches reports whether existing satisfies template. onlyHave selects mustonlyhave semantics.
func matches(template, existing any, onlyHave bool) bool {
	switch t := template.(type) {
	case map[string]any:
		e, ok := existing.(map[string]any)
		if !ok {
			return existing == nil && len(t) == 0
		}
		for k, tv := range t {
			ev, present := e[k]
			if !present {
				if isEmpty(tv) {
					continue
				}
				return false
			}
			if !matches(tv, ev, onlyHave) {
				return false
			}
		}
		if onlyHave {
			for k, ev := range e {
				if _, named := t[k]; !named && !isEmpty(ev) {
					return false
				}
			}
		}
		return true
	case []any:
		e, ok := existing.([]any)
		if !ok {
			return existing == nil && len(t) == 0
		}
		if onlyHave {
			return sameItems(t, e)
		}
		for _, item := range t {
			if indexOfMatch(item, e, nil) < 0 {
				return false
			}
		}
		return true
	case nil:
		return isEmpty(existing)
	default:
		return equalScalar(t, existing)
	}
}

// sameItems reports whether the lists hold the same items in any order, each template item
// matching a distinct existing item exactly.
func sameItems(template, existing []any) bool {
	if len(template) != len(existing) {
		return false
	}
	used := make([]bool, len(existing))
	for _, item := range template {
		i := indexOfMatch(item, existing, used)
		if i < 0 {
			return false
		}
		used[i] = true
	}
	return true
}

// indexOfMatch returns the first index of list (not yet used) that item matches, or -1.
// Exactness follows the item: with used set, the lists are compared with mustonlyhave semantics.
func indexOfMatch(item any, list []any, used []bool) int {
	onlyHave := used != nil
	for i, candidate := range list {
		if onlyHave && used[i] {
			continue
		}
		if matches(item, candidate, onlyHave) {
			return i
		}
	}
	return -1
}

// merge returns the value that makes existing satisfy template: with musthave, existing with the
// template laid over it (maps merged, missing list items appended); with mustonlyhave, the
// template itself. Scalars that already satisfy the template are kept. The result shares no maps
// or lists with its inputs.
func merge(template, existing any, onlyHave bool) any {
	switch t := template.(type) {
	case map[string]any:
		e, _ := existing.(map[string]any)
		out := make(map[string]any, len(t)+len(e))
		if !onlyHave {
			for k, v := range e {
				out[k] = deepCopy(v)
			}
		}
		for k, tv := range t {
			out[k] = merge(tv, e[k], onlyHave)
		}
		return out
	case []any:
		e, ok := existing.([]any)
		if onlyHave || !ok {
			return deepCopy(t)
		}
		out := deepCopy(e).([]any)
		for _, item := range t {
			if i := indexOfMatch(item, e, nil); i >= 0 {
				out[i] = merge(item, e[i], false)
				continue
			}
			out = append(out, deepCopy(item))
		}
		return out
	default:
		// A value that already satisfies the template stays as it is (1024Mi for a template's
		// 1Gi): equality here is not transitive (1 ~ "1" ~ "1.0", but 1 !~ "1.0"), so writing
		// the template's spelling over it could break the match of another template item that
		// found the same existing item.
		if existing != nil && equalScalar(t, existing) {
			return existing
		}
		return t
	}
}

// equalScalar compares leaf values the way a user reads them: numbers by value whatever their Go
// type, quantities by amount ("1Gi" equals "1024Mi"), and a number equal to its string form.
func equalScalar(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	if x, ok := number(a); ok {
		if y, ok := number(b); ok {
			return x == y
		}
	}
	as, aString := a.(string)
	bs, bString := b.(string)
	if aString && bString {
		qa, errA := resource.ParseQuantity(as)
		qb, errB := resource.ParseQuantity(bs)
		return errA == nil && errB == nil && qa.Cmp(qb) == 0
	}
	if aString != bString && a != nil && b != nil {
		return fmt.Sprint(a) == fmt.Sprint(b)
	}
	return false
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case float32:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// isEmpty treats a missing field and an empty one alike, as the apiserver drops empty values.
func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	case string:
		return x == ""
	}
	return false
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	default:
		return x
	}
}
