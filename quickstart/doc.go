// Package quickstart is what `regent quickstart` runs: a local fleet of a hub and three managed
// clusters whose labels make placement interesting, with OCM's placement controller, Regent's hub
// and a spoke addon per cluster running, and a sample policy rolling out group by group. It
// prints kubeconfigs and kubectl lines to try, and stops cleanly on Ctrl-C. It is the newcomer's
// first command, so it builds what is missing and says what it does.
package quickstart
