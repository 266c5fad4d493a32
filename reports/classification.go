package reports

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// Classification is what every result of a policy says about the policy itself, beside its
// outcome: the severity and category its author gave it.
type Classification struct {
	Severity openreportsv1alpha1.ResultSeverity
	Category string
}

// severities are the values openreports' schema allows; a report holding any other is refused
// whole by the apiserver.
var severities = map[string]openreportsv1alpha1.ResultSeverity{
	"critical": "critical", "high": "high", "medium": "medium", "low": "low", "info": "info",
}

// Classify reads a Kubewarden policy's annotations as Kubewarden's audit scanner does: the results
// of a monitor-mode policy are of severity info whatever the annotation says, the others carry
// the severity annotation, and all carry the category annotation as written; no annotation, no
// field. Unlike Kubewarden, whose report is then refused, a severity openreports does not know is
// left out and returned as invalid so the producer can say so; case and surrounding spaces do not
// matter ("High" is high).
func Classify(annotations map[string]string, monitor bool) (c Classification, invalid string) {
	c.Category = annotations[kubewardenv1.AnnotationCategory]
	if monitor {
		c.Severity = "info"
		return c, ""
	}
	raw, ok := annotations[kubewardenv1.AnnotationSeverity]
	if !ok {
		return c, ""
	}
	if s, known := severities[strings.ToLower(strings.TrimSpace(raw))]; known {
		c.Severity = s
		return c, ""
	}
	return c, raw
}

// Stamp gives r the classification.
func (c Classification) Stamp(r *openreportsv1alpha1.ReportResult) {
	r.Severity, r.Category = c.Severity, c.Category
}

// Version is the version a report records for results of a policy at generation whose
// annotations are these. The annotations change no generation, so the classification ones are
// part of the version: when a policy's severity or category annotation changes, every report
// holding its results is stale and is redone. A policy without them is at its generation alone,
// and so is what monitor mode makes info: the mode is part of the generation already.
func Version(generation string, annotations map[string]string) string {
	sev, hasSev := annotations[kubewardenv1.AnnotationSeverity]
	cat, hasCat := annotations[kubewardenv1.AnnotationCategory]
	if !hasSev && !hasCat {
		return generation
	}
	// Quoted, so no value can pass for the other annotation.
	key := ""
	if hasSev {
		key += "severity" + strconv.Quote(sev)
	}
	if hasCat {
		key += "category" + strconv.Quote(cat)
	}
	sum := sha256.Sum256([]byte(key))
	return generation + "-" + hex.EncodeToString(sum[:])[:10]
}
