package specsync

import (
	"maps"
	"strconv"

	"k8s.io/apimachinery/pkg/api/equality"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// HubGenerationAnnotation records on the managed cluster's copy which generation of the hub
// replica its spec is. Status sync reports it back as lastEvaluatedGeneration once the templates
// were evaluated at that spec, which is what the hub's rollout gates on.
const HubGenerationAnnotation = "regent.dev/hub-generation"

// desired is the managed cluster's copy of a hub replica: same name, spec, labels and
// annotations, plus the hub generation.
func desired(hub *policyv1.Policy) *policyv1.Policy {
	local := &policyv1.Policy{}
	local.Name, local.Namespace = hub.Name, hub.Namespace
	local.Labels = maps.Clone(hub.Labels)
	local.Annotations = maps.Clone(hub.Annotations)
	if local.Annotations == nil {
		local.Annotations = map[string]string{}
	}
	local.Annotations[HubGenerationAnnotation] = strconv.FormatInt(hub.Generation, 10)
	hub.Spec.DeepCopyInto(&local.Spec)
	return local
}

// inSync is true when current already carries what want asks for; labels and annotations other
// tools added on the managed cluster are left alone.
func inSync(current, want *policyv1.Policy) bool {
	if !equality.Semantic.DeepEqual(current.Spec, want.Spec) {
		return false
	}
	for k, v := range want.Labels {
		if current.Labels[k] != v {
			return false
		}
	}
	for k, v := range want.Annotations {
		if current.Annotations[k] != v {
			return false
		}
	}
	return true
}
