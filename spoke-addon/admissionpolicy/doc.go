// Package admissionpolicy is the controller half of Regent's admission policy lifecycle, the
// Kubewarden lifecycle RFC built out.
//
// Every generation of a ClusterAdmissionPolicy or AdmissionPolicy becomes a PolicyRevision in the
// controller's namespace, marked Scheduled. The policy server's leader pulls, precompiles,
// validates and signs it (Initialized); every replica loads it beside the generation it already
// serves and reports whether it did in the revision's status.replicas. Only when every live
// replica (one whose Lease is current) is Ready for generation N does the policy's webhook
// configuration move to `/validate/<policy>/<N>`; until then, and forever if N fails, the
// previous generation keeps answering. Revisions beyond the PolicyServer's kept count are then
// disabled and deleted.
//
// A policy's status holds Kubewarden's policyStatus (scheduled, pending, active) and standard
// conditions, one per type, each with the generation it is about as observedGeneration:
// Scheduled, Initialized, Ready (every live replica serves the newest generation; the replicas'
// own reports are in status.replicas) and Kubewarden's PolicyActive (the webhook configuration
// calls the newest generation), so `kubectl wait --for=condition=PolicyActive` after an apply
// returns once that generation answers.
//
// The rollback annotation (kubewardenv1.RollbackAnnotation) names a kept generation whose spec is
// copied back to the policy, which then goes through the same lifecycle as a new generation — an
// annotation rather than a spec field so the spec stays exactly Kubewarden's.
//
// A PolicyServer's pods run its spec.image, except Kubewarden's policy-server image, which every
// Kubewarden PolicyServer names and which cannot run Regent's arguments: Regent's own image runs
// instead, and the ImageSubstituted condition and an Event say so (policyserver_image.go).
//
// A PolicyServer becomes a StatefulSet of replicas running `regent policy-server --lifecycle
// --role=replica`, a Deployment of one leader pod running `--role=leader`, their Services and
// NetworkPolicies, a serving certificate and the Secrets of the key the leader signs cache files
// with (and of the token replicas fetch signed entries from the leader with), issued by an
// internal CA the controller keeps. The leader is a workload of its own because a pod has one
// identity and only the leader's ServiceAccount may read the signing key; the PolicyServer's
// LeaderReady condition says whether it has an available pod, and while it has none the replicas
// keep serving what they loaded and a new generation's Initialized condition says it waits. The signed module cache needs no ReadWriteMany storage: each replica keeps
// its own, an emptyDir by default or a ReadWriteOnce claim per replica (cacheStorageClassName),
// filled from the leader over TLS and verified; one shared ReadWriteMany claim is an option
// (cacheAccessMode). The pods run as Pod Security "restricted" asks, with a read-only root. Its replicas
// run as a ServiceAccount (the PolicyServer's own, or the one it names) with a Role granting
// exactly the calls a replica makes, and a ClusterRole granting reads of the kinds its
// ClusterAdmissionPolicies list in contextAwareResources, plus can_i's SubjectAccessReviews. The
// leader runs as a ServiceAccount the controller always owns, with a Role for leading (the
// leader Lease, the Lease it publishes its address on, the signing key by name) and a ClusterRole
// with the same reads plus the background scan's.
//
// What to do is decided by pure functions over plain inputs (decide.go, liveness.go,
// webhook_config.go, rollback.go); the reconcilers around them read, decide and write.
package admissionpolicy
