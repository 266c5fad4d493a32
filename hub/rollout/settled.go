package rollout

import (
	"encoding/binary"
	"encoding/json"
	"hash/maphash"
	"sort"
	"sync"

	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// settled remembers, per root, the last decision Plan took that changed nothing: every cluster
// kept its status and transition time, none started or timed out, and nothing but an event can
// change it (no RecheckAfter). Asked again about the same input, Plan answers it again. Such a
// decision is the input itself plus three facts, so a root costs 16 bytes here, not a copy of its
// clusters.
//
// This is what keeps a large propagation from re-deciding a 3,000-cluster root on every batch of
// its replicas' watch events: sdk-go's RolloutHandler walks and copies every cluster on each call
// (~60 % of a settled root's reconcile), while the input here is hashed without allocating.
type settled struct {
	seed maphash.Seed
	m    sync.Map // root key → settledDecision
}

type settledDecision struct {
	input       uint64
	aggregate   policyv1.RolloutStatus
	budgetSpent bool
}

// fingerprint hashes everything Plan reads of in, or false when in has no root key. Cluster lines
// are summed, so their order does not matter; each is hashed whole, so a change of any field of
// any cluster changes the sum.
func (s *settled) fingerprint(in Input) (uint64, bool) {
	if in.Root == "" {
		return 0, false
	}
	strategy, err := json.Marshal(in.Strategy)
	if err != nil {
		return 0, false
	}
	var h maphash.Hash
	h.SetSeed(s.seed)
	var buf [8]byte
	line := func(parts ...[]byte) uint64 {
		h.Reset()
		for _, p := range parts {
			binary.LittleEndian.PutUint64(buf[:], uint64(len(p)))
			_, _ = h.Write(buf[:])
			_, _ = h.Write(p)
		}
		return h.Sum64()
	}
	sum := line([]byte{byte(in.Mode)}, strategy)
	for key, clusters := range in.Groups {
		binary.LittleEndian.PutUint64(buf[:], uint64(key.GroupIndex))
		index := buf
		for name := range clusters {
			sum += line([]byte("g"), []byte(name), []byte(key.GroupName), index[:])
		}
	}
	for name, c := range in.Clusters {
		var since [9]byte
		if c.LastTransitionTime != nil {
			since[0] = 1
			binary.LittleEndian.PutUint64(since[1:], uint64(c.LastTransitionTime.Unix()))
		}
		// Only a progressive rollout reads Active (observe, newToRollout).
		active := []byte{0}
		if c.Active && in.Mode == Progressive {
			active[0] = 1
		}
		sum += line([]byte("c"), []byte(name), []byte(c.Status), since[:], active, []byte(c.Reported))
	}
	return sum, true
}

// lookup returns the decision Plan took last for this very input, when it changed nothing.
func (s *settled) lookup(in Input, fingerprint uint64) (Decision, bool) {
	v, ok := s.m.Load(in.Root)
	if !ok || v.(settledDecision).input != fingerprint {
		return Decision{}, false
	}
	sd := v.(settledDecision)
	out := Decision{Clusters: in.Clusters, BudgetSpent: sd.budgetSpent, Aggregate: sd.aggregate}
	for name, c := range in.Clusters {
		if c.Status == policyv1.RolloutFailed || c.Status == policyv1.RolloutTimeOut {
			out.Failing = append(out.Failing, name)
		}
	}
	sort.Strings(out.Failing)
	return out, true
}

// record keeps d for in when it changed nothing, and forgets the root's earlier one otherwise.
func (s *settled) record(in Input, fingerprint uint64, d Decision) {
	if in.Root == "" {
		return
	}
	unchanged := len(d.Started) == 0 && len(d.TimedOut) == 0 && d.RecheckAfter == nil && len(d.Clusters) == len(in.Clusters)
	deadline := HasDeadline(in.Strategy)
	for name, c := range d.Clusters {
		if !unchanged {
			break
		}
		was, ok := in.Clusters[name]
		unchanged = ok && was.Status == c.Status && was.LastTransitionTime != nil && c.LastTransitionTime != nil &&
			was.LastTransitionTime.Equal(c.LastTransitionTime)
		// The handler times out a cluster in flight once the deadline passed: then the same input
		// gets another answer later, whether or not the handler said when (it names the recheck
		// time only of the clusters in its window).
		if deadline && (c.Status == policyv1.RolloutProgressing || c.Status == policyv1.RolloutFailed) {
			unchanged = false
		}
	}
	if !unchanged {
		s.m.Delete(in.Root)
		return
	}
	s.m.Store(in.Root, settledDecision{input: fingerprint, aggregate: d.Aggregate, budgetSpent: d.BudgetSpent})
}

// Forget drops what the planner remembers of a root that no longer exists.
func (p *Planner) Forget(root string) {
	p.settled.m.Delete(root)
}

// HasDeadline says whether the strategy times out clusters that do not succeed: a
// progressDeadline other than "None" (the default when empty).
func HasDeadline(s clusterv1alpha1.RolloutStrategy) bool {
	var d string
	switch {
	case s.All != nil:
		d = s.All.ProgressDeadline
	case s.Progressive != nil:
		d = s.Progressive.ProgressDeadline
	case s.ProgressivePerGroup != nil:
		d = s.ProgressivePerGroup.ProgressDeadline
	}
	return d != "" && d != "None"
}
