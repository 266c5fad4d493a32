// Package quickstart is what `regent quickstart` runs: a local fleet of a hub and three managed
// clusters whose labels make placement interesting, with OCM's placement controller, Regent's hub
// and a spoke addon per cluster running, and a sample policy rolling out group by group. It
// prints kubeconfigs and kubectl lines to try, and the hub's fleet dashboard with a ServiceAccount
// allowed to look (dashboard.go), and stops cleanly on Ctrl-C. Its processes are
// supervised as Deployments would keep them: one that dies is started again with a backoff, and
// the user reads which one died, how, and its new PID (supervise.go). It is the newcomer's
// first command, so it builds what is missing and says what it does. It needs neither root nor
// any system package; with --real-node (opt-in, root and Debian's containerd, runc and CNI
// plugins) the dev cluster gets a real node, and the quickstart shows a pod Running on it and a
// privileged pod refused by the policy server's webhook.
package quickstart
