package propagator

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// replicatedSizeOverLimit is the Propagated condition's reason on a root whose replicas would
// take more of etcd than the hub allows one root.
const replicatedSizeOverLimit = "ReplicatedSizeOverLimit"

// replicatedBytes is what root's replicas take in etcd once every selected cluster has one: the
// serialized replica (the longest cluster name standing for all) times the clusters.
func replicatedBytes(root *policyv1.Policy, clusters sets.Set[string]) (perReplica, total int64, err error) {
	if clusters.Len() == 0 {
		return 0, 0, nil
	}
	longest := ""
	for c := range clusters {
		if len(c) > len(longest) {
			longest = c
		}
	}
	raw, err := json.Marshal(newReplica(root, longest, &root.Spec))
	if err != nil {
		return 0, 0, fmt.Errorf("serialize replica of %s/%s: %w", root.Namespace, root.Name, err)
	}
	return int64(len(raw)), int64(len(raw)) * int64(clusters.Len()), nil
}

// checkReplicatedSize refuses a root whose replicas would exceed MaxReplicatedBytes. Such a root
// is not propagated at all until it shrinks or selects fewer clusters: no replica is created or
// updated, and the replicas it already has are left as they are (neither updated nor deleted), so
// clusters keep the last generation that fit.
func (r *Reconciler) checkReplicatedSize(root *policyv1.Policy, clusters sets.Set[string]) error {
	if r.MaxReplicatedBytes <= 0 {
		return nil
	}
	per, total, err := replicatedBytes(root, clusters)
	if err != nil {
		return err
	}
	if total <= r.MaxReplicatedBytes {
		return nil
	}
	return fmt.Errorf("replicas would take %s in etcd (%d clusters × %s), over the hub's limit of %s per root policy: "+
		"select fewer clusters or make the policy smaller; existing replicas are left as they are",
		quantity(total), clusters.Len(), quantity(per), quantity(r.MaxReplicatedBytes))
}

func quantity(bytes int64) string {
	return resource.NewQuantity(bytes, resource.BinarySI).String()
}
