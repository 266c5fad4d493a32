package configpolicy

import (
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"sigs.k8s.io/yaml"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// recordDiffCensored is the internal recordDiff of kinds whose content may be secret: the status
// says a diff exists without showing it.
const recordDiffCensored policyv1.RecordDiff = "Censored"

// maxDiffLines bounds a diff kept in the status; a policy status is one etcd object.
const maxDiffLines = 1000

const censoredDiff = `# The difference is not recorded because the object may contain sensitive data. ` +
	`Set spec["object-templates"][].recordDiff to "InStatus" to record it in the status (never for Secrets) or to "Log" for the controller's log.`

const secretDiff = `# The difference is not recorded in the status for Secrets; set spec["object-templates"][].recordDiff to "Log" to see it in the controller's log.`

// effectiveRecordDiff is where a template's diff goes. As in OCM an unset recordDiff records in
// the status except for kinds that carry secrets (ConfigMap, Secret), which are censored; Regent
// never puts a Secret's diff in the status, even when asked to.
func effectiveRecordDiff(set policyv1.RecordDiff, group, kind string) policyv1.RecordDiff {
	sensitive := group == "" && (kind == "Secret" || kind == "ConfigMap")
	switch {
	case set == "" && sensitive:
		return recordDiffCensored
	case set == "":
		return "InStatus"
	case set == "InStatus" && group == "" && kind == "Secret":
		return recordDiffCensored
	}
	return set
}

// objectDiff is a unified diff of the object as found and as the template wants it, in YAML,
// labelled "<namespace>/<name> : existing" and "... : updated" as OCM's diffs are.
func objectDiff(existing, desired map[string]any, namespace, name string) string {
	a, errA := yaml.Marshal(withoutNoise(existing))
	b, errB := yaml.Marshal(withoutNoise(desired))
	if errA != nil || errB != nil {
		return ""
	}
	id := name
	if namespace != "" {
		id = namespace + "/" + name
	}
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(a)), B: difflib.SplitLines(string(b)),
		FromFile: id + " : existing", ToFile: id + " : updated", Context: 1,
	})
	if err != nil {
		return ""
	}
	if lines := strings.SplitAfter(d, "\n"); len(lines) > maxDiffLines {
		d = strings.Join(lines[:maxDiffLines], "") + "# diff truncated\n"
	}
	return d
}

// withoutNoise drops the fields a diff of intent has no use for.
func withoutNoise(obj map[string]any) map[string]any {
	out := deepCopy(obj).(map[string]any)
	if md, ok := out["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
		delete(md, "resourceVersion")
	}
	return out
}

// diffFor is what a result records for recordDiff: the diff (InStatus or Log), a note instead of
// it (censored) or nothing.
func (t *template) diffFor(existing, desired map[string]any, namespace string) (status, log string) {
	switch t.recordDiff {
	case "InStatus":
		return objectDiff(existing, desired, namespace, t.name), ""
	case "Log":
		return "", objectDiff(existing, desired, namespace, t.name)
	case recordDiffCensored:
		if t.gvk.Kind == "Secret" {
			return secretDiff, ""
		}
		return censoredDiff, ""
	}
	return "", ""
}
