// Package verify runs policy test suites, the job of `regent verify`: Gatekeeper's gator suites
// (suite.yaml, kind Suite, test.gatekeeper.sh/v1alpha1) unchanged, and Regent's own PolicyTest
// files for every other kind of admission policy. Each suite is timed, every case gets a pass,
// failure or skip with its reason, and a run fails when any case fails.
//
// Both run policies as a policy server would. A gator test's ConstraintTemplate is compiled by the
// policy server's own loader (policyserver.PolicyConfig.EngineSpec) with the constraint's
// parameters as settings and evaluated by its engine, whose per-violation messages the assertions
// count. A gator case's inventory files are that case's data.inventory, laid out as Gatekeeper
// replicates cluster state (engine.Inventory), so referential templates run as they would on a
// server that replicates those kinds; each case starts from its own inventory only. A PolicyTest goes through a whole in-process policy server (package
// localrun), so what it checks is the AdmissionResponse the server would send.
//
// # The PolicyTest format
//
// A YAML file anywhere under the directories given:
//
//	apiVersion: regent.dev/v1alpha1
//	kind: PolicyTest
//	metadata:
//	  name: require-team-label
//	policy:                  # an entry of the policy server's policies file
//	  module: ../rego/require-team-label.rego   # relative to this file; registry:// and https:// too
//	  executionMode: opa     # default: from the module's name (.rego opa, .yaml gatekeeper, else waPC)
//	  settings: {}           # a policy's settings (a Gatekeeper template's constraint parameters)
//	  mutating: false
//	  mode: protect          # or monitor
//	cases:
//	- name: a pod without a team label is rejected
//	  request: pod.yaml      # an AdmissionReview, its request, or an object reviewed as a CREATE
//	  expect:
//	    allowed: false
//	    message: has no team label   # a regular expression the status message must match
//	    code: 403
//	- name: the default label is added
//	  request: {apiVersion: v1, kind: Pod, metadata: {name: web}}   # inline works too
//	  settings: {required: [team], defaults: {team: unowned}}       # replaces policy.settings
//	  expect:
//	    allowed: true
//	    patched: true        # a JSONPatch is (true) or is not (false) in the response
//
// Every expect field is optional except allowed. A case with skip: true is reported as skipped.
package verify
