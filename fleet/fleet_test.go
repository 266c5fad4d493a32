package fleet_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet"
)

func newClient(t *testing.T, c *fleet.Cluster) client.Client {
	t.Helper()
	cl, err := client.New(c.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// eventually polls cond every 100ms until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestFleet_HubAndTwoManagedClusters_ServeRegisterCollectAndStopClean(t *testing.T) {
	ctx := context.Background()
	f, err := fleet.Start(ctx, fleet.Options{Managed: []fleet.ClusterSpec{
		{Name: "cluster1", Labels: map[string]string{"environment": "dev"}},
		{Name: "cluster2", Labels: map[string]string{"environment": "prod"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = f.Stop()
		}
	}()

	for _, c := range append([]*fleet.Cluster{f.Hub}, f.Managed...) {
		dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
		if err != nil {
			t.Fatal(err)
		}
		v, err := dc.ServerVersion()
		if err != nil {
			t.Fatalf("%s apiserver does not answer: %v", c.Name, err)
		}
		if v.GitVersion != fleet.KubernetesVersion {
			t.Errorf("%s runs %s, want %s", c.Name, v.GitVersion, fleet.KubernetesVersion)
		}
		if _, err := os.Stat(c.Kubeconfig); err != nil {
			t.Errorf("%s kubeconfig: %v", c.Name, err)
		}
	}

	hub := newClient(t, f.Hub)
	for _, c := range f.Managed {
		mc := &clusterv1.ManagedCluster{}
		if err := hub.Get(ctx, types.NamespacedName{Name: c.Name}, mc); err != nil {
			t.Fatalf("ManagedCluster %s: %v", c.Name, err)
		}
		if mc.Labels["environment"] != c.Labels["environment"] || !mc.Spec.HubAcceptsClient {
			t.Errorf("ManagedCluster %s: labels %v, accepted %v", c.Name, mc.Labels, mc.Spec.HubAcceptsClient)
		}
		if err := hub.Get(ctx, types.NamespacedName{Name: c.Name}, &corev1.Namespace{}); err != nil {
			t.Errorf("cluster namespace %s on the hub: %v", c.Name, err)
		}
	}

	// The managed cluster's own controller manager collects owned objects and finishes namespace
	// deletion.
	spoke := newClient(t, f.Managed[0])
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}
	if err := spoke.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: "default"}}
	if err := spoke.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owned", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}}}
	if err := spoke.Create(ctx, owned); err != nil {
		t.Fatal(err)
	}
	if err := spoke.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	if err := spoke.Delete(ctx, ns); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "owned ConfigMap collected", func() bool {
		return apierrors.IsNotFound(spoke.Get(ctx, client.ObjectKeyFromObject(owned), &corev1.ConfigMap{}))
	})
	eventually(t, time.Minute, "deleted namespace gone", func() bool {
		return apierrors.IsNotFound(spoke.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{}))
	})

	pids := f.PIDs()
	if len(pids) != 9 {
		t.Errorf("fleet runs %d processes %v, want 9 (3 clusters x etcd, kube-apiserver, kube-controller-manager)", len(pids), pids)
	}
	stopped = true
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d still running after Stop", pid)
		}
	}
	if _, err := os.Stat(f.Dir); !os.IsNotExist(err) {
		t.Errorf("fleet folder %s left behind: %v", f.Dir, err)
	}
}

// alive is true for a running process; a zombie waiting to be reaped has already stopped.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

func TestCheckBinaries_MissingBinarySaysMakeTestbin(t *testing.T) {
	err := fleet.CheckBinaries(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "make testbin") {
		t.Fatalf("CheckBinaries on an empty folder = %v, want an error that says to run make testbin", err)
	}
	if _, err := fleet.Start(context.Background(), fleet.Options{BinDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "make testbin") {
		t.Fatalf("Start without binaries = %v, want an error that says to run make testbin", err)
	}
}
