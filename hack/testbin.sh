#!/usr/bin/env bash
# Builds the binaries the local fleet runs — kube-apiserver, kube-controller-manager, etcd, OCM's
# components (`ocm`: placement controller, registration, work and addon) and, for a real node,
# kubenode (kubelet + kube-scheduler + kube-proxy) — and OPA's own server (the placement API's
# differential tests compare against it) from the Go module proxy, because no release binaries
# can be downloaded here. Each lands in a versioned cache folder and is never rebuilt once there.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.35.4}
ETCD_VERSION=${ETCD_VERSION:-v3.6.5}
OCM_VERSION=${OCM_VERSION:-v1.2.1}
# OPA is the version go.mod pins, so `opa run --server` evaluates with the same engine Regent
# embeds; it is not part of the folder name (adding it would rebuild everything else), the binary
# is rebuilt instead when its version no longer matches.
OPA_VERSION=${OPA_VERSION:-$(awk '$1 == "github.com/open-policy-agent/opa" {print $2}' "$(dirname "$0")/../go.mod")}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/regent/testbin
dir=$cache/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-ocm-$OCM_VERSION
if [ "${1:-}" = "--print-dir" ]; then echo "$dir"; exit 0; fi
mkdir -p "$dir"

log() { printf '[testbin %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# build NAME MODULE-SETUP-FUNCTION MAIN: builds one binary in a throwaway module; MAIN is either
# the source of a main package or the import path of one inside the required module.
build() {
  local name=$1 setup=$2 main=$3 pkg=. ldflags="-s -w ${4:-}"
  if [ -x "$dir/$name" ]; then log "$name: cached"; return; fi
  local work; work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  log "$name: building (first time only; minutes on 2 cores)"
  local start=$SECONDS
  case $main in package*) ;; *) pkg=$main; main='//go:build tools

package main

import _ "'$main'"' ;; esac
  (cd "$work" && $setup && printf '%s\n' "$main" > main.go && go mod tidy >/dev/null 2>&1 &&
    CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$dir/$name.tmp" "$pkg" ) ||
    { log "$name: build failed"; return 1; }
  mv "$dir/$name.tmp" "$dir/$name"
  log "$name: built in $((SECONDS - start))s"
}

# k8s.io/kubernetes replaces its staging repos with ./staging paths, which a module consumer
# cannot see; map each one to the published module of the same minor version.
k8s_module() {
  go mod init regent.dev/testbin/k8s >/dev/null 2>&1
  local gomod; gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  local staging="v0${K8S_VERSION#v1}"
  go mod edit -require="k8s.io/kubernetes@$K8S_VERSION"
  grep -oE '^\s*k8s.io/[a-z0-9-]+ => ./staging' "$gomod" | awk '{print $1}' | while read -r m; do
    go mod edit -replace="$m=$m@$staging"
  done
}
etcd_module() { go mod init regent.dev/testbin/etcd >/dev/null 2>&1; go mod edit -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION"; }
opa_module() { go mod init regent.dev/testbin/opa >/dev/null 2>&1; go mod edit -require="github.com/open-policy-agent/opa@$OPA_VERSION"; }
# OCM's go.sum seeds the checksums: one of its dependencies (sigs.k8s.io/about-api, a pseudo-version)
# is unknown to sum.golang.org, so `go mod tidy` could not verify it otherwise.
ocm_module() {
  go mod init regent.dev/testbin/ocm >/dev/null 2>&1
  go mod edit -require="open-cluster-management.io/ocm@$OCM_VERSION"
  local src; src=$(go mod download -json "open-cluster-management.io/ocm@$OCM_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  cp "$src/go.sum" go.sum && chmod 0644 go.sum
}

# Without these the binaries report v0.0.0-master, which clients that check versions refuse.
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
k8s_version_flags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_version_flags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done

# Two lanes build at once: Kubernetes' binaries share most of their packages and follow one
# another through the build cache, while etcd, OCM and OPA have dependency sets of their own. A
# single go build leaves a core idle through its links and its long dependency chains; a cold
# run took ~34 minutes one binary at a time on 2 cores.
(
build kube-apiserver k8s_module 'package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() { os.Exit(cli.Run(app.NewAPIServerCommand())) }' "$k8s_version_flags"

build kube-controller-manager k8s_module 'package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() { os.Exit(cli.Run(app.NewControllerManagerCommand())) }' "$k8s_version_flags"

# kubectl, so the lines the quickstart prints work on a machine that has none.
build kubectl k8s_module 'package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
)

func main() { os.Exit(cli.Run(cmd.NewDefaultKubectlCommand())) }' "$k8s_version_flags"

# A real node: kubelet, kube-scheduler and kube-proxy as ONE binary dispatching on its first
# argument ("kubenode kubelet --config ..."), so the packages they share (most of pkg/) compile
# once: the kubelet alone takes ~10 minutes cold on 2 cores, the three apart would take ~25.
build kubenode k8s_module 'package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	commands := map[string]func() *cobra.Command{
		"kubelet":        func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
		"kube-scheduler": func() *cobra.Command { return scheduler.NewSchedulerCommand() },
		"kube-proxy":     proxy.NewProxyCommand,
	}
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: kubenode kubelet|kube-scheduler|kube-proxy [flags]")
		os.Exit(2)
	}
	cmd := commands[os.Args[1]]()
	cmd.SetArgs(os.Args[2:])
	os.Exit(cli.Run(cmd))
}' "$k8s_version_flags"

) &
k8s_lane=$!
(
build etcd etcd_module 'package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }'

# OCM's hub controllers and agents as one binary: `ocm registration|work|addon|placement ...`
# dispatches to the cobra root of each of OCM's own commands, so the dependencies they share
# compile once. Only the chosen command is constructed: the registration and work commands both
# register feature gates on the same gate sets, which refuse additions once bound to flags.
# `ocm addon conversion-webhook` serves OCM's own ManagedClusterAddOn/ClusterManagementAddOn
# conversions (v1alpha1, which OCM reads, and v1beta1, which addon-framework writes) like OCM's
# `addon webhook-server`, but with its probe and metrics ports off: that one binds :8000 and :8080,
# which parallel fleets on one machine would fight over.
build ocm ocm_module 'package main

import (
	goflag "flag"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	utilflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"
	ocmfeature "open-cluster-management.io/api/feature"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	addonv1alpha1 "open-cluster-management.io/ocm/pkg/addon/webhook/v1alpha1"
	addonv1beta1 "open-cluster-management.io/ocm/pkg/addon/webhook/v1beta1"
	"open-cluster-management.io/ocm/pkg/cmd/hub"
	"open-cluster-management.io/ocm/pkg/cmd/spoke"
	"open-cluster-management.io/ocm/pkg/features"
)

func conversionWebhook() *cobra.Command {
	var port int
	var certDir, kubeconfig string
	cmd := &cobra.Command{
		Use: "conversion-webhook",
		RunE: func(*cobra.Command, []string) error {
			ctrl.SetLogger(klog.NewKlogr())
			scheme := clientgoscheme.Scheme
			utilruntime.Must(addonv1alpha1.Install(scheme))
			utilruntime.Must(addonv1beta1.Install(scheme))
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return err
			}
			mgr, err := ctrl.NewManager(cfg, ctrl.Options{
				Scheme:                 scheme,
				Metrics:                metricsserver.Options{BindAddress: "0"},
				HealthProbeBindAddress: "0",
				WebhookServer:          webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: certDir}),
			})
			if err != nil {
				return err
			}
			for _, w := range []interface{ Init(ctrl.Manager) error }{
				&addonv1alpha1.ManagedClusterAddOnWebhook{}, &addonv1beta1.ManagedClusterAddOnWebhook{},
				&addonv1alpha1.ClusterManagementAddOnWebhook{}, &addonv1beta1.ClusterManagementAddOnWebhook{},
			} {
				if err := w.Init(mgr); err != nil {
					return err
				}
			}
			return mgr.Start(ctrl.SetupSignalHandler())
		},
	}
	cmd.Flags().IntVar(&port, "port", 9443, "port the conversion webhook serves on (127.0.0.1)")
	cmd.Flags().StringVar(&certDir, "certdir", "", "folder holding tls.crt and tls.key")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "hub kubeconfig")
	return cmd
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: ocm registration|work|addon|placement <command> [flags]")
		os.Exit(2)
	}
	pflag.CommandLine.SetNormalizeFunc(utilflag.WordSepNormalizeFunc)
	pflag.CommandLine.AddGoFlagSet(goflag.CommandLine)
	logs.AddFlags(pflag.CommandLine)
	logs.InitLogs()
	defer logs.FlushLogs()

	root := &cobra.Command{Use: "ocm " + os.Args[1]}
	switch os.Args[1] {
	case "registration":
		utilruntime.Must(features.HubMutableFeatureGate.Add(ocmfeature.DefaultHubRegistrationFeatureGates))
		features.HubMutableFeatureGate.AddFlag(pflag.CommandLine)
		root.AddCommand(hub.NewRegistrationController(), spoke.NewRegistrationAgent())
	case "work":
		utilruntime.Must(features.HubMutableFeatureGate.Add(ocmfeature.DefaultHubWorkFeatureGates))
		features.HubMutableFeatureGate.AddFlag(pflag.CommandLine)
		root.AddCommand(hub.NewWorkController(), spoke.NewWorkAgent())
	case "addon":
		root.AddCommand(hub.NewAddonManager(), conversionWebhook())
	case "placement":
		root.AddCommand(hub.NewPlacementController())
	default:
		fmt.Fprintf(os.Stderr, "ocm: unknown component %q\n", os.Args[1])
		os.Exit(2)
	}
	root.SetArgs(os.Args[2:])
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}'

# The version is read whole before it is matched: grep -q stops reading at its match, and under
# pipefail the SIGPIPE that opa then gets would count as a mismatch.
if [ -x "$dir/opa" ] && ! grep -qx "Version: ${OPA_VERSION#v}" <<<"$("$dir/opa" version 2>/dev/null || true)"; then
  log "opa: not $OPA_VERSION, rebuilding"
  rm -f "$dir/opa"
fi
build opa opa_module github.com/open-policy-agent/opa

) &
other_lane=$!
failed=0
wait "$k8s_lane" || failed=1
wait "$other_lane" || failed=1
if [ "$failed" = 1 ]; then log "a build failed (see above)"; exit 1; fi
log "ready in $dir"
