// Package quickstart is what `regent quickstart` runs: a local fleet of a hub and three managed
// clusters whose labels make placement interesting, kubeconfigs to try, and a clean stop on
// Ctrl-C. It is the newcomer's first command, so it builds what is missing and says what it does.
package quickstart
