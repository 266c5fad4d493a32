package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Cluster is one running cluster of the fleet.
type Cluster struct {
	// Name is the cluster's name; for managed clusters also its ManagedCluster and namespace on
	// the hub.
	Name string
	// Labels are the ManagedCluster's labels (managed clusters only).
	Labels map[string]string
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Kubeconfig is the path of an admin kubeconfig file.
	Kubeconfig string
	// Dir holds the cluster's data, certificates and logs.
	Dir string
	// Node is the cluster's real node, when its ClusterSpec asked for one.
	Node *Node

	env     *envtest.Environment
	ca      *clientCA // set when kube-controller-manager signs CSRs (OCM's agents)
	serving servingOptions
	kcm     *exec.Cmd
	done    chan struct{}
	once    sync.Once
}

// EtcdURL is the client URL of the cluster's etcd: benchmarks read its /metrics for the bytes
// their objects take.
func (c *Cluster) EtcdURL() string {
	if c.env == nil || c.env.ControlPlane.Etcd == nil || c.env.ControlPlane.Etcd.URL == nil {
		return ""
	}
	return c.env.ControlPlane.Etcd.URL.String()
}

// startCluster runs etcd and kube-apiserver (through envtest, with parent-death wrappers), installs
// crds, writes an admin kubeconfig and starts kube-controller-manager. With ca, the apiserver
// trusts client certificates from it and kube-controller-manager signs CSRs with it; serving says
// where the apiserver listens and whether the cluster runs real pods.
func startCluster(ctx context.Context, name, dir, binDir, wrapDir string, crds []*apiextensionsv1.CustomResourceDefinition, serving servingOptions, ca *clientCA) (*Cluster, error) {
	c := &Cluster{Name: name, Dir: dir, serving: serving, ca: ca}
	for _, sub := range []string{"etcd", "certs", "logs"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, err
		}
	}
	logFile := func(component string) (*os.File, error) {
		return os.Create(filepath.Join(dir, "logs", component+".log"))
	}
	etcdLog, err := logFile("etcd")
	if err != nil {
		return nil, err
	}
	apiLog, err := logFile("kube-apiserver")
	if err != nil {
		return nil, err
	}
	c.env = &envtest.Environment{
		BinaryAssetsDirectory:    wrapDir,
		CRDs:                     crds,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 3 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
		ControlPlane: envtest.ControlPlane{
			Etcd:      &envtest.Etcd{DataDir: filepath.Join(dir, "etcd"), Out: etcdLog, Err: etcdLog},
			APIServer: &envtest.APIServer{CertDir: filepath.Join(dir, "certs"), Out: apiLog, Err: apiLog},
		},
	}
	if err := serving.apply(c.env.ControlPlane.APIServer); err != nil {
		return nil, fmt.Errorf("%s apiserver serving: %w", name, err)
	}
	if ca != nil {
		c.env.ControlPlane.APIServer.SecureServing.Authn = ca
	}
	cfg, err := c.env.Start()
	if err != nil {
		_ = c.env.Stop()
		return nil, fmt.Errorf("start %s apiserver (logs in %s): %w", name, filepath.Join(dir, "logs"), err)
	}
	admin, err := c.env.AddUser(envtest.User{Name: "regent-admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		_ = c.env.Stop()
		return nil, fmt.Errorf("%s admin user: %w", name, err)
	}
	c.Config = admin.Config()
	c.Config.QPS, c.Config.Burst = 200, 400
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		_ = c.env.Stop()
		return nil, err
	}
	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, kubeconfig, 0o600); err != nil {
		_ = c.env.Stop()
		return nil, err
	}
	if err := c.startControllerManager(binDir); err != nil {
		_ = c.env.Stop()
		return nil, err
	}
	return c, nil
}

// startControllerManager runs the garbage collector and namespace controllers: without them a
// deleted namespace stays Terminating forever and owned objects are never collected. It also
// aggregates ClusterRoles (aggregationRule), as every real cluster does: the spoke addon's policy
// permissions are one.
func (c *Cluster) startControllerManager(binDir string) error {
	out, err := os.Create(filepath.Join(c.Dir, "logs", "kube-controller-manager.log"))
	if err != nil {
		return err
	}
	controllers := "garbagecollector,namespace,clusterrole-aggregation"
	var signing []string
	if c.ca != nil {
		// The certificates OCM's agents and addons ask for (signer kubernetes.io/kube-apiserver-client)
		// are issued by the CA the apiserver trusts, so they authenticate to it.
		controllers += ",csrsigning"
		signing = []string{"--cluster-signing-kube-apiserver-client-cert-file=" + c.ca.certFile(),
			"--cluster-signing-kube-apiserver-client-key-file=" + c.ca.keyFile()}
	}
	args := append([]string{
		"--kubeconfig=" + c.Kubeconfig,
		"--controllers=" + controllers,
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-gc-syncs=5",
		"--concurrent-namespace-syncs=5",
	}, signing...)
	if c.serving.pods {
		args = append(args, c.serving.podControllerArgs(c.env.ControlPlane.APIServer.CertDir)...)
	}
	c.kcm = exec.Command(filepath.Join(binDir, "kube-controller-manager"), args...)
	c.kcm.Stdout, c.kcm.Stderr = out, out
	c.kcm.SysProcAttr = deathSignal()
	if err := c.kcm.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start %s kube-controller-manager: %w", c.Name, err)
	}
	c.done = make(chan struct{})
	go func() {
		_ = c.kcm.Wait()
		out.Close()
		close(c.done)
	}()
	return nil
}

// stop ends the node (its pods removed from the host), kube-controller-manager, then
// kube-apiserver and etcd.
func (c *Cluster) stop() error {
	var err error
	c.once.Do(func() {
		var nodeErr error
		if c.Node != nil {
			nodeErr = c.Node.stop()
		}
		defer func() { err = errors.Join(nodeErr, err) }()
		if c.kcm != nil && c.kcm.Process != nil {
			_ = c.kcm.Process.Signal(syscall.SIGTERM)
			select {
			case <-c.done:
			case <-time.After(10 * time.Second):
				_ = c.kcm.Process.Kill()
				<-c.done
			}
		}
		err = c.env.Stop()
	})
	return err
}
