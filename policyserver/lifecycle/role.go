package lifecycle

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
)

// Role is the part of the lifecycle a process plays. In a cluster the leader's work needs the
// signing key, which only the leader's ServiceAccount may read, and a pod has one identity: so
// the replicas (a StatefulSet, as the replica ServiceAccount) play RoleReplica and a workload of
// its own (as the leader ServiceAccount) plays RoleLeader. A local process, with one kubeconfig
// that may do both, plays RoleAll.
type Role string

const (
	// RoleAll serves admission, reports Ready as its replica and campaigns for the leader Lease,
	// leading while it holds it (the default).
	RoleAll Role = "all"
	// RoleReplica serves admission and reports Ready as its replica; it never campaigns, and
	// fetches the signed entries it lacks from the leader.
	RoleReplica Role = "replica"
	// RoleLeader campaigns for the leader Lease and, while it holds it, pulls, precompiles,
	// validates and signs revisions, serves their signed entries to the replicas and runs the
	// background scan. It serves no admission request, renews no replica Lease and reports no
	// replica's readiness: the controller counts replicas only.
	RoleLeader Role = "leader"
)

// ParseRole reads a --role value; "" is RoleAll.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case "":
		return RoleAll, nil
	case RoleAll, RoleReplica, RoleLeader:
		return r, nil
	}
	return "", fmt.Errorf("role %q: want %s, %s or %s", s, RoleAll, RoleReplica, RoleLeader)
}

func (r Role) campaigns() bool     { return r != RoleReplica }
func (r Role) servesReplica() bool { return r != RoleLeader }

// leaderHolderName names a RoleLeader process in its election identity (leaderHolderName_<random>)
// and, after ReplicaLeaseName, the Lease it publishes its address on while it leads.
const leaderHolderName = "leader"

// holderName is what an election identity starts with: the replica number, or leaderHolderName
// for a process that is no replica. Replicas read it to find the Lease carrying the leader's
// address (transfer.go).
func (o Options) holderName() string {
	if o.Role == RoleLeader {
		return leaderHolderName
	}
	return strconv.Itoa(o.Replica)
}

// LeaderAddressLeaseName is the Lease a RoleLeader process renews while it leads, holding the
// address it serves signed entries on and its cache version, as a replica's Lease does for a
// RoleAll leader. Its name does not parse as a replica number, so the controller never counts it
// as a replica.
func LeaderAddressLeaseName(policyServer string) string {
	return fmt.Sprintf("regent-policy-server-%s-replica-%s", policyServer, leaderHolderName)
}

// leaderHandler is what a RoleLeader process serves on its TLS listener: the signed entries,
// and probes. /readyz is ready once the process runs (it is only served after the informers
// synced), leading or on standby: readiness tied to the Lease would keep a rolling update's new
// pod unready behind the old one, which holds the Lease until it stops.
func leaderHandler(rep *replica, leading *atomic.Bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if leading.Load() {
			_, _ = io.WriteString(w, "ok\nleading\n")
			return
		}
		_, _ = io.WriteString(w, "ok\nstandby: another process holds the leader Lease\n")
	})
	mux.HandleFunc("GET "+transferPathPrefix, rep.serveEntry)
	return mux
}
