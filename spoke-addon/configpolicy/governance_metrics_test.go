package configpolicy

import (
	"context"
	"fmt"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// governanceSeries returns cluster_policy_governance_info's series of one namespace from the
// registry the addon's /metrics serves, as "kind/policy/severity=value".
func governanceSeries(t testing.TB, namespace string) []string {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range families {
		if f.GetName() != "cluster_policy_governance_info" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["policy_namespace"] == namespace {
				out = append(out, fmt.Sprintf("%s/%s/%s=%v", labels["kind"], labels["policy"], labels["severity"], m.GetGauge().GetValue()))
			}
		}
	}
	return out
}

func testGovernanceInfoFollowsCompliance(t *testing.T, c client.Client) {
	ns := "governance-info"
	namespace(t, c, ns, nil)
	apply(t, c, policyYAML(ns, "cm", "inform", `
object-templates:
- complianceType: musthave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: app, namespace: governance-info}}`))
	state(t, c, ns, "cm", policyv1.NonCompliant)
	eventually(t, "NonCompliant policy: series [ConfigurationPolicy/cm/low=1]", func() bool {
		return fmt.Sprint(governanceSeries(t, ns)) == "[ConfigurationPolicy/cm/low=1]"
	})
	apply(t, c, configMap(ns, "app", "{}"))
	state(t, c, ns, "cm", policyv1.Compliant)
	eventually(t, "Compliant policy: series [ConfigurationPolicy/cm/low=0]", func() bool {
		return fmt.Sprint(governanceSeries(t, ns)) == "[ConfigurationPolicy/cm/low=0]"
	})
	p := &policyv1.ConfigurationPolicy{}
	p.Namespace, p.Name = ns, "cm"
	if err := c.Delete(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "no series for a deleted policy", func() bool { return len(governanceSeries(t, ns)) == 0 })
}
