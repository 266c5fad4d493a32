package main

import (
	"context"
	"encoding/json"
	"flag"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"

	"k8s.io/client-go/tools/clientcmd"

	"regent.dev/regent/placement/opa"
)

// memStats is what the child reports on SIGUSR1, after a GC: the live heap is the engine's store,
// the informers' caches and the compiled policy.
type memStats struct {
	HeapAlloc uint64 `json:"heapAlloc"`
	HeapInuse uint64 `json:"heapInuse"`
	Sys       uint64 `json:"sys"`
}

// serve runs the placement engine and API as `regent hub --placement-api-addr` does.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "hub kubeconfig")
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	var o opa.Options
	fs.StringVar(&o.CertFile, "cert", "", "certificate file")
	fs.StringVar(&o.KeyFile, "key", "", "key file")
	fs.StringVar(&o.Namespace, "namespace", "", "policy namespace")
	memFile := fs.String("memstats", "", "where to write heap figures on SIGUSR1")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run here")
	_ = fs.Parse(args)

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 200, 400
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		for range usr1 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			b, _ := json.Marshal(memStats{HeapAlloc: m.HeapAlloc, HeapInuse: m.HeapInuse, Sys: m.Sys})
			if f, err := os.Create(*memFile + ".heap"); err == nil {
				_ = pprof.WriteHeapProfile(f) // where the heap goes, for go tool pprof
				f.Close()
			}
			_ = os.WriteFile(*memFile+".tmp", b, 0o644)
			_ = os.Rename(*memFile+".tmp", *memFile)
		}
	}()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return opa.Serve(ctx, cfg, o, ln)
}
