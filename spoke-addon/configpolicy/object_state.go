package configpolicy

import (
	"fmt"
	"sort"
	"strings"
)

// objectState is what a template found for one object; it decides the object's compliance and
// the words OCM users know from config-policy-controller's messages.
type objectState int

const (
	foundAsSpecified objectState = iota
	notFound
	foundNotAsSpecified
	missingAsExpected
	foundButShouldNot
	created
	updated
	deleted
	writeFailed
	recreated
	updateImmutable // update refused, recreateOption None
	recreateTimeout // deleted for a recreate, still terminating
)

func (s objectState) compliant() bool {
	switch s {
	case foundAsSpecified, missingAsExpected, created, updated, deleted, recreated:
		return true
	}
	return false
}

// text completes "<resource> [<names>] ..." in a compliance message.
func (s objectState) text() string {
	return [...]string{
		foundAsSpecified:    "found as specified",
		notFound:            "not found",
		foundNotAsSpecified: "found but not as specified",
		missingAsExpected:   "missing as expected",
		foundButShouldNot:   "found",
		created:             "was created successfully",
		updated:             "was updated successfully",
		deleted:             "was deleted successfully",
		writeFailed:         "could not be changed",
		recreated:           "was recreated successfully",
		updateImmutable:     `cannot be updated, likely due to immutable fields not matching, you may set spec["object-templates"][].recreateOption to recreate the object`,
		recreateTimeout:     "timed out waiting for the object to delete during recreate, will retry on the next policy evaluation",
	}[s]
}

// relatedReason is the reason of a related object in the status, as OCM words it.
func (s objectState) relatedReason() string {
	return [...]string{
		foundAsSpecified:    "Resource found as expected",
		notFound:            "Resource not found but should exist",
		foundNotAsSpecified: "Resource found but does not match",
		missingAsExpected:   "Resource not found as expected",
		foundButShouldNot:   "Resource found but should not exist",
		created:             "K8s creation success",
		updated:             "K8s update success",
		deleted:             "K8s deletion success",
		writeFailed:         "K8s error",
		recreated:           "K8s update success",
		updateImmutable:     "K8s update failure",
		recreateTimeout:     "K8s deletion pending",
	}[s]
}

// objectResult is the outcome for one object (or, for a kind-wide template that found nothing,
// for the absence of any).
type objectResult struct {
	namespace, name string
	state           objectState
	uid             string
	detail          string // the error of a failed write
	diff            string // the template's change to the object, for recordDiff
}

// templateMessage builds OCM's message for a template: one clause per state and namespace,
// "<resource> [<names>] <text> in namespace <ns>", joined by "; " in a stable order.
func templateMessage(resource string, results []objectResult) string {
	type key struct {
		state     objectState
		namespace string
	}
	names := map[key][]string{}
	var details []string
	for _, r := range results {
		if r.state == writeFailed {
			details = append(details, clause(resource, []string{r.name}, r.state.text()+": "+r.detail, r.namespace))
			continue
		}
		k := key{r.state, r.namespace}
		names[k] = append(names[k], orDash(r.name))
	}
	keys := make([]key, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].namespace != keys[j].namespace {
			return keys[i].namespace < keys[j].namespace
		}
		return keys[i].state < keys[j].state
	})
	clauses := make([]string, 0, len(keys)+len(details))
	for _, k := range keys {
		sort.Strings(names[k])
		if k.state == updateImmutable || k.state == recreateTimeout {
			// OCM words these with the namespace before the reason.
			clauses = append(clauses, clause(resource, names[k], "", k.namespace)+" "+k.state.text())
			continue
		}
		clauses = append(clauses, clause(resource, names[k], k.state.text(), k.namespace))
	}
	sort.Strings(details)
	return strings.Join(append(clauses, details...), "; ")
}

func clause(resource string, names []string, text, namespace string) string {
	s := fmt.Sprintf("%s [%s]", resource, strings.Join(names, ", "))
	if text != "" {
		s += " " + text
	}
	if namespace != "" {
		s += " in namespace " + namespace
	}
	return s
}
