// Package dashboard is the hub's read-only fleet dashboard: one web page, served beside the
// placement query API on the hub's HTTPS address and behind the same authorization (a token the
// hub apiserver accepts, whose user may get the non-resource URL /dashboard), that shows where
// each root policy's rollout stands group by group and what it waits for, compliance per policy
// and cluster as a heat map, the rolled-up report counts and the admission-policy serving
// generation of each cluster.
//
// Everything it shows comes from the hub manager's informer cache: a change to a Policy,
// PlacementDecision or rolled-up Report rebuilds one model (debounced), and every open page
// receives its slice of it through server-sent events. No request of a browser reaches the
// apiserver except the reviews of its token, which are cached. A view is always paged and
// aggregated (counts per group and status, a page of clusters, a filter), so a fleet of
// thousands of clusters renders as a few hundred cells.
//
// The page is plain HTML, CSS and JavaScript embedded in the binary: nothing is fetched from
// elsewhere, there is no build step.
package dashboard
