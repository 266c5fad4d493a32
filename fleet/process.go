package fleet

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Process is a program the fleet runs beside its clusters (a controller, Regent's own processes).
type Process struct {
	Name string
	// Log is the file its output goes to.
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartProcess runs bin with args, its output in <fleet>/logs/<name>.log, tied to this process
// by the parent-death signal and stopped by Stop.
func (f *Fleet) StartProcess(name, bin string, args ...string) (*Process, error) {
	return f.startProcess(name, bin, nil, args...)
}

// startProcess is StartProcess with env added to this process's environment.
func (f *Fleet) startProcess(name, bin string, env []string, args ...string) (*Process, error) {
	p, err := startProcess(filepath.Join(f.Dir, "logs"), name, bin, env, args...)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.extra = append(f.extra, p)
	f.mu.Unlock()
	return p, nil
}

// startProcess runs bin with args and env added to this process's environment, its output in
// logDir/<name>.log, tied to this process by the parent-death signal.
func startProcess(logDir, name, bin string, env []string, args ...string) (*Process, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	p := &Process{Name: name, Log: filepath.Join(logDir, name+".log"), done: make(chan struct{})}
	out, err := os.Create(p.Log)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin, args...)
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = deathSignal()
	if err := p.cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = p.cmd.Wait(); out.Close(); close(p.done) }()
	return p, nil
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitError is the process's exit status once Done is closed.
func (p *Process) ExitError() error {
	if p.cmd.ProcessState != nil && !p.cmd.ProcessState.Success() {
		return fmt.Errorf("%s exited: %s (log: %s)", p.Name, p.cmd.ProcessState, p.Log)
	}
	return nil
}

// Stop asks the process to end (SIGTERM) and kills it if it has not within the grace period.
func (p *Process) Stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Kill ends the process at once, as a crash would.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// WriteKubeconfig writes cfg (certificate or token credentials) as a kubeconfig file.
func WriteKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken, ClientCertificateData: cfg.CertData,
		ClientKeyData: cfg.KeyData, ClientCertificate: cfg.CertFile, ClientKey: cfg.KeyFile}
	kc.Contexts["default"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user"}
	kc.CurrentContext = "default"
	return clientcmd.WriteToFile(*kc, path)
}

// PID is the process's ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// State is how the process ended (exit status or signal) once Done is closed; nil before.
func (p *Process) State() *os.ProcessState {
	select {
	case <-p.done:
		return p.cmd.ProcessState
	default:
		return nil
	}
}
