package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"regent.dev/regent/policyserver"
	"regent.dev/regent/policyserver/capabilities"
	"regent.dev/regent/policyserver/lifecycle"
	"regent.dev/regent/policyserver/lifecycle/pull"
	"regent.dev/regent/policyserver/signatures"
	"regent.dev/regent/reports/background"
)

func newPolicyServerCommand() *cobra.Command {
	var opts policyserver.Options
	var lc lifecycle.Options
	var useLifecycle, replicaFromHostname bool
	var scan background.Options
	var backgroundScan bool
	var kubeconfig, leaderKubeconfig, pullCA, role, verificationConfig, sigstoreTrustConfig string
	var reportFlags admissionReportFlags
	var limits kubeAPILimits
	cmd := &cobra.Command{
		Use:   "policy-server",
		Short: "Serve admission requests with WebAssembly policies (waPC, WASI, OPA, Gatekeeper)",
		Long: "Without --lifecycle the policies come from --policies, a Kubewarden policies.yml. With --lifecycle they\n" +
			"come from the PolicyRevisions of --policy-server: the replica holding the Lease pulls, precompiles,\n" +
			"validates and signs them into its cache (--shared-cache, or its own --signed-cache from which the others\n" +
			"fetch them), and every replica verifies and loads them and reports Ready. --role splits the two where\n" +
			"one identity may not do both: in a cluster the StatefulSet's replicas run --role=replica and a\n" +
			"Deployment of its own, as the leader's ServiceAccount, --role=leader.\n\n" +
			"Probes and leader election differ from the other long-running subcommands, as Kubewarden's policy\n" +
			"server's do: /livez and /readyz are served on --addr (HTTPS, beside the admission endpoints; /readyz\n" +
			"says which policies are loaded), not on a --health-probe-bind-address. There is no --leader-elect: with\n" +
			"--lifecycle, --role all and leader campaign for the Lease regent-policy-server-<--policy-server> in\n" +
			"--namespace, and --role=replica never does.",
		Example: `  # policies from a Kubewarden policies.yml, no cluster needed
  regent policy-server --policies policies.yml --cert-file tls.crt --key-file tls.key
  # a replica of PolicyServer default, as the spoke addon's StatefulSet runs it
  regent policy-server --lifecycle --role=replica --policy-server=default --namespace=regent-system \
    --replica-from-hostname --signed-cache=/work/signed --cert-file=/tls/tls.crt --key-file=/tls/tls.key`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Logger = ctrl.Log.WithName("policy-server")
			if err := limits.check(""); err != nil {
				return err
			}
			if pullCA != "" {
				pem, err := os.ReadFile(pullCA)
				if err != nil {
					return fmt.Errorf("--pull-ca: %w", err)
				}
				lc.Pull.CAs = x509.NewCertPool()
				if !lc.Pull.CAs.AppendCertsFromPEM(pem) {
					return fmt.Errorf("--pull-ca %s holds no PEM certificate", pullCA)
				}
			}
			if verificationConfig != "" && !useLifecycle {
				return errors.New("--verification-config needs --lifecycle: only revisions' modules are verified")
			}
			trust, verification := loadSignatureTrust(verificationConfig, sigstoreTrustConfig, ctrl.Log)
			lc.SigstoreTrust, lc.Verification = trust, verification
			if !useLifecycle {
				host, err := fileModeCapabilities(cmd.Context(), kubeconfig, limits, lc.Pull.CAs, trust, opts.Logger)
				if err != nil {
					return err
				}
				opts.Host = host
				if opts.AdmissionReports, err = reportFlags.fileModeOptions(cmd.Context(), kubeconfig, limits, opts.Logger); err != nil {
					return err
				}
				return policyserver.Run(cmd.Context(), opts)
			}
			cfg, err := loadConfig(cmd.Context(), kubeconfig, limits)
			if err != nil {
				return err
			}
			if lc.Role, err = lifecycle.ParseRole(role); err != nil {
				return fmt.Errorf("--role: %w", err)
			}
			if replicaFromHostname {
				if lc.Replica, err = replicaOrdinal(); err != nil {
					return err
				}
			}
			if lc.AdvertiseAddress, err = advertiseAddress(lc.AdvertiseAddress, opts.Addr); err != nil {
				return err
			}
			if leaderKubeconfig != "" {
				if lc.LeaderConfig, err = loadConfig(cmd.Context(), leaderKubeconfig, limits); err != nil {
					return fmt.Errorf("--leader-kubeconfig: %w", err)
				}
			}
			opts.AdmissionReports = reportFlags.lifecycleOptions()
			lc.Config, lc.Server, lc.Logger = cfg, opts, opts.Logger
			if backgroundScan {
				lc.Background = &scan
			}
			return lifecycle.Run(cmd.Context(), lc)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Addr, "addr", ":8443", "HTTPS listen address (admission, /readyz, /livez)")
	f.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":9090", "plain-HTTP listen address of /metrics, never served on --addr (empty: off)")
	deprecatedAlias(f, "metrics-addr", "metrics-bind-address")
	f.StringVar(&opts.CertFile, "cert-file", "", "serving certificate (reloaded when it changes)")
	f.StringVar(&opts.KeyFile, "key-file", "", "serving key")
	f.StringVar(&opts.PoliciesFile, "policies", "", "policies configuration file (applied live when it changes); not with --lifecycle")
	f.StringVar(&opts.CacheDir, "cache-dir", "", "compilation cache folder, kept across restarts (with --lifecycle: the replica's private cache)")
	f.IntVar(&opts.Workers, "workers", 0, "evaluations at once (default: cores)")
	f.IntVar(&opts.PolicyWorkers, "policy-workers", 0, "evaluations of one policy at once (default: workers-1, at least 1), so a slow policy leaves the others a worker")
	f.IntVar(&opts.PolicyQueue, "policy-queue", 0, "requests of one policy waiting for its share before it answers 429 (default: 1024 per worker)")
	f.DurationVar(&opts.PolicyBorrowLimit, "policy-borrow-limit", 0, "a policy whose evaluations are short (under an eighth of this) may use workers beyond --policy-workers while they are free; an evaluation on a borrowed worker is cut at this limit and run again in the policy's own share (default: 25ms; negative: never borrow)")
	f.DurationVar(&opts.PolicyQueueWait, "policy-queue-wait", 0, "expected wait, from the policy's recent evaluation times, beyond which one policy's requests are answered 429 (default: 1s; negative: no bound)")
	f.BoolVar(&useLifecycle, "lifecycle", false, "serve the PolicyRevisions of --policy-server (hot reload, leader, signed shared cache)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "cluster kubeconfig: the cluster context-aware policies read and, with --lifecycle, the one holding the revisions\n"+
		"(default: $KUBECONFIG, ~/.kube/config, in-cluster; without --lifecycle, finding none only makes policies' lookups fail)")
	f.StringVar(&leaderKubeconfig, "leader-kubeconfig", "", "identity the leader reads the signing key Secret with: the PolicyServer's leader ServiceAccount\n"+
		"(default: --kubeconfig's, which a replica's ServiceAccount is refused)")
	f.StringVar(&lc.PolicyServer, "policy-server", "default", "PolicyServer whose revisions this replica serves")
	f.StringVar(&lc.Namespace, "namespace", "regent-system", "namespace of the PolicyRevisions, Leases and signing Secret")
	f.StringVar(&role, "role", string(lifecycle.RoleAll), "with --lifecycle, the part this process plays: all (serve, report Ready, and lead while holding the Lease),\n"+
		"replica (serve and report Ready, never campaign) or leader (lead while holding the Lease and serve signed entries, no admission)")
	f.IntVar(&lc.Replica, "replica", 0, "this replica's number")
	f.BoolVar(&replicaFromHostname, "replica-from-hostname", false, "take the replica number from a StatefulSet hostname (<name>-<n>)")
	f.StringVar(&lc.SharedCache, "shared-cache", "", "folder of signed cache entries every replica shares (ReadWriteMany volume); not with --signed-cache")
	f.StringVar(&lc.SignedCache, "signed-cache", "", "this replica's own folder of signed cache entries (emptyDir or ReadWriteOnce volume): what it lacks it fetches\n"+
		"from the leader and verifies; not with --shared-cache")
	f.StringVar(&lc.AdvertiseAddress, "advertise-address", "", "host or host:port other replicas reach this one at (the pod IP; the port defaults to --addr's):\n"+
		"where they fetch signed cache entries while this replica leads")
	f.StringVar(&lc.PeerCAFile, "peer-ca-file", "", "with --signed-cache, the PEM CA bundle the leader's serving certificate must chain to (re-read when it changes);\n"+
		"with --peer-server-name, a replica fetches only from a leader that proves that name (unset: the leader is not authenticated)")
	f.StringVar(&lc.PeerServerName, "peer-server-name", "", "the name the leader's certificate must be issued for: the policy server Service's DNS name (the leader is dialled at its pod IP)")
	f.StringVar(&pullCA, "pull-ca", "", "PEM CA bundle trusted for https:// and registry:// pulls, and for policies' registry lookups")
	f.StringVar(&verificationConfig, "verification-config", "", "with --lifecycle, Kubewarden's verification-config file (a PolicyServer's verificationConfig ConfigMap):\n"+
		"only registry modules whose cosign signatures meet it are loaded")
	f.StringVar(&sigstoreTrustConfig, "sigstore-trust-config", "", "Sigstore ClientTrustConfig (or trusted_root.json) file, a PolicyServer's sigstoreTrustConfig ConfigMap: the Fulcio CAs and\n"+
		"Rekor logs keyless signatures are checked against, for --verification-config and policies' oci verify calls (none: keyless is refused)")
	f.StringArrayVar(&lc.Pull.FileRoots, "pull-file-root", nil, "directory file:// modules and plain paths may be read from (repeatable; default none: no module is read from the pod's files)")
	f.BoolVar(&lc.Pull.AllowPrivateRedirects, "pull-allow-private-redirects", false, "let https:// and registry pulls follow redirects to loopback, private and link-local addresses")
	f.DurationVar(&lc.Pull.Timeout, "pull-timeout", 2*time.Minute, "budget of one revision's module pull")
	f.Int64Var(&lc.Pull.MaxBytes, "pull-max-bytes", pull.DefaultMaxModuleBytes, "largest module a pull accepts")
	f.BoolVar(&backgroundScan, "background-scan", true, "with --lifecycle, the leader evaluates existing objects with the policies that have backgroundAudit and writes their reports")
	f.DurationVar(&scan.Interval, "background-scan-interval", time.Hour, "re-evaluate every object with every policy this often, for what changed without an event (0: never)")
	f.IntVar(&scan.Workers, "background-scan-workers", 2, "objects the background scan evaluates at once (it shares --workers with admission)")
	f.Float32Var(&scan.QPS, "background-scan-qps", 200, "requests per second the background scan may send (a changed report costs two), apart from the replica's own")
	reportFlags.register(f)
	// Policies' lookups and their inventory's informers have limits of their own (capabilities):
	// the lookups sit on the admission path, where a token bucket would only queue admissions.
	limits.register(f, "", "the apiserver for revisions, Ready reports, Leases and admission reports",
		lifecycle.DefaultQPS, lifecycle.DefaultBurst)
	return cmd
}

// loadSignatureTrust reads the --sigstore-trust-config and --verification-config files (either
// may be ""). Neither stops the server when unreadable: previous revisions keep serving. An
// unreadable verification config trusts no module, saying why on each revision; so does an
// unreadable trust root, since what the operator meant to trust is not known. Without a readable
// trust root, policies' keyless verification requests are refused.
func loadSignatureTrust(verificationPath, trustPath string, log logr.Logger) (*signatures.TrustRoot, *signatures.Config) {
	var trust *signatures.TrustRoot
	var trustErr error
	if trustPath != "" {
		if trust, trustErr = signatures.LoadTrustRoot(trustPath); trustErr != nil {
			log.Error(trustErr, "the Sigstore trust config cannot be used: keyless signatures will not be trusted")
		}
	}
	if verificationPath == "" {
		return trust, nil
	}
	cfg, err := signatures.LoadFile(verificationPath, trust)
	if trustErr != nil {
		err = trustErr
	}
	if err != nil {
		log.Error(err, "the verification config cannot be used: no module will be trusted")
		return trust, signatures.Broken(err)
	}
	return trust, cfg
}

// fileModeCapabilities are the host capabilities of a server that reads its policies from a
// file. A Kubernetes configuration is optional there: a server with policies that never look
// anything up needs none, and one that does answers their lookups with an error naming what is
// missing.
func fileModeCapabilities(ctx context.Context, kubeconfig string, limits kubeAPILimits, registryCAs *x509.CertPool, trust *signatures.TrustRoot, log logr.Logger) (*capabilities.Host, error) {
	cfg, err := loadConfig(ctx, kubeconfig, limits)
	if err != nil {
		if kubeconfig != "" {
			return nil, fmt.Errorf("--kubeconfig: %w", err)
		}
		log.Info("no Kubernetes configuration found ($KUBECONFIG, ~/.kube/config, in-cluster): context-aware policies' lookups will fail", "reason", err.Error())
		cfg = nil
	}
	return capabilities.New(capabilities.Options{Kubernetes: cfg, RegistryCAs: registryCAs, Sigstore: trust, Logger: log.WithName("policy")})
}

// replicaOrdinal reads a StatefulSet pod's ordinal from its hostname.
func replicaOrdinal() (int, error) {
	host, err := os.Hostname()
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(host, '-')
	n, err := strconv.Atoi(host[i+1:])
	if i < 0 || err != nil {
		return 0, fmt.Errorf("hostname %q is not a StatefulSet pod's <name>-<ordinal>", host)
	}
	return n, nil
}

// advertiseAddress completes a host given to --advertise-address with the port of --addr.
func advertiseAddress(advertise, addr string) (string, error) {
	if advertise == "" {
		return "", nil
	}
	if _, _, err := net.SplitHostPort(advertise); err == nil {
		return advertise, nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--addr %q: %w", addr, err)
	}
	return net.JoinHostPort(strings.Trim(advertise, "[]"), port), nil
}
