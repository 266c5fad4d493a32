package main

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"regent.dev/regent/fleet"
)

func main() {
	ctx := context.Background()
	began := time.Now()
	f, err := fleet.Start(ctx, fleet.Options{Managed: []fleet.ClusterSpec{{Name: "cluster1", RealNode: true}},
		NodeImages: []string{"/tmp/realnode-pause.tar", "/tmp/realnode-regent.tar"}, PauseImage: "regent.dev/pause:smoke", Log: os.Stdout})
	if err != nil {
		fmt.Println("start:", err)
		os.Exit(1)
	}
	defer func() { fmt.Println("stop:", f.Stop()) }()
	fmt.Println("fleet with node in", time.Since(began))
	c := f.Cluster("cluster1")
	cs := kubernetes.NewForConfigOrDie(c.Config)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "r", Image: "regent.dev/regent:smoke", ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"version"}}},
		RestartPolicy: corev1.RestartPolicyNever}}
	for {
		if _, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	for i := 0; i < 120; i++ {
		p, _ := cs.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
		fmt.Println(p.Status.Phase, p.Status.PodIP, p.Status.Message)
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			break
		}
		time.Sleep(time.Second)
	}
	if os.Getenv("HOLD") != "" {
		fmt.Println("holding; dir", f.Dir)
		time.Sleep(10 * time.Minute)
	}
}
